package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/capture"
	"github.com/fencepost/fencepost/proxy/mitm"
	"github.com/fencepost/fencepost/test/netns"
)

// captureNetnsEnv names the namespace a re-run of this test binary runs
// in: the capture test's body runs inside a namespace of its own, where
// the whole process — sidecar, fake upstreams, worker — lives, so the nat
// rules it installs touch nothing of the host.
const captureNetnsEnv = "CAPTURE_TEST_NETNS"

// workerUID is the uid the worker's connections are made as: the rules
// capture only it (the uid-matched setup of fencepost run --capture), so
// the sidecar — this process, uid 0 — dials upstream uncaptured.
const workerUID = 4247

// TestCaptureInNetns: a worker that ignores every proxy setting (a Go
// client with Proxy: nil, a raw TCP client) has its writes stamped exactly
// once over HTTP, HTTPS (intercepted) and IPv6, and blocked after revoke
// with the same problem as a proxied call; non-HTTP TCP follows
// capture.other_tcp; with the sidecar stopped a captured connection is
// refused; after Remove the worker goes direct again.
func TestCaptureInNetns(t *testing.T) {
	if !netns.Inside(captureNetnsEnv) {
		netns.Reexec(t, "fpcapp", captureNetnsEnv)
		return
	}
	tables, err := capture.Detect(capture.Auto, "")
	require.NoError(t, err)
	families := capture.Families()

	fc := newFakeCluster()
	ca := newTestCA(t, mitm.Config{Hosts: []string{netns.UpstreamIPv4}})
	up := startUpstreamOnAddr(t, net.JoinHostPort(netns.UpstreamIPv4, "0"), nil)
	leaf, err := ca.ca.Leaf(netns.UpstreamIPv4)
	require.NoError(t, err)
	tlsLn, err := net.Listen("tcp", net.JoinHostPort(netns.UpstreamIPv4, "0"))
	require.NoError(t, err)
	upTLS := startUpstreamOn(t, tls.NewListener(tlsLn, &tls.Config{Certificates: []tls.Certificate{*leaf}}), nil)
	raw := startPingServer(t, net.JoinHostPort(netns.UpstreamIPv4, "0"))

	cfg := interceptConfig(t, ca.file)
	cfg.Intercept.Hosts = []string{netns.UpstreamIPv4}
	cfg.Capture = Capture{Listen: "127.0.0.1:0"}
	cfg.ConnectAllow = []string{"allowed.test:" + strconv.Itoa(portOf(t, upTLS.addr()))}
	s := startSidecar(t, fc, cfg)
	plan := capture.Plan{ListenPort: portOf(t, s.CaptureAddr()), WorkerUID: workerUID,
		Tag: "fpcap-proxy-test", Chain: "FPCAP_PROXY_TEST"}
	t.Cleanup(func() { _ = tables.Remove(plan, families) })
	require.NoError(t, tables.Install(plan, families))

	g := mustAcquire(t, s, "t1")
	worker := workerClient(t, s)

	// HTTP: stamped exactly once, and downstream the same as a proxied call.
	resp, body := doReq(t, worker, "POST", "http://"+up.addr()+"/w", "x", nil)
	require.Equal(t, 200, resp.StatusCode, body)
	resp, body = doReq(t, proxyClient(t, s, ""), "POST", "http://"+up.addr()+"/w", "x", nil)
	require.Equal(t, 200, resp.StatusCode, body)
	reqs := up.requests()
	require.Len(t, reqs, 2)
	token := []string{strconv.FormatUint(g.Lease.Epoch, 10)}
	for _, r := range reqs {
		require.Equal(t, token, r.values(fence.HeaderToken))
		require.Len(t, r.values(fence.HeaderIdempotencyKey), 1)
	}
	require.Equal(t, headerNames(reqs[1]), headerNames(reqs[0]), "a captured request is indistinguishable from a proxied one")
	require.Equal(t, reqs[1].Host, reqs[0].Host)

	// HTTPS, intercepted by server name (here the IP: Go sends no SNI for one).
	resp, body = doReq(t, worker, "POST", "https://"+upTLS.addr()+"/charge", "amount=5", nil)
	require.Equal(t, 200, resp.StatusCode, body)
	require.Equal(t, token, upTLS.requests()[0].values(fence.HeaderToken))

	// TLS to a host that is not intercepted: as a CONNECT to it, refused
	// unless connect.allow lists it, then a blind tunnel under the lease.
	blindTLS := func(sni string) error {
		c := dialWorker(t, upTLS.addr())
		tc := tls.Client(c, &tls.Config{ServerName: sni, InsecureSkipVerify: true}) //nolint:gosec // the upstream's leaf names its IP
		require.NoError(t, tc.SetDeadline(time.Now().Add(5*time.Second)))
		return tc.Handshake()
	}
	require.Error(t, blindTLS("not-listed.test"), "TLS to a host neither intercepted nor allowed is closed")
	require.NoError(t, blindTLS("allowed.test"), "an allow-listed host gets a blind tunnel while the lease is current")

	// IPv6, where the namespace has it.
	if len(families) > 1 {
		up6 := startUpstreamOnAddr(t, net.JoinHostPort(netns.UpstreamIPv6, "0"), nil)
		resp, body = doReq(t, worker, "PUT", "http://"+up6.addr()+"/w6", "x", nil)
		require.Equal(t, 200, resp.StatusCode, body)
		require.Len(t, up6.requests(), 1)
		require.Equal(t, token, up6.requests()[0].values(fence.HeaderToken))
	} else {
		t.Log("no IPv6 in the namespace: IPv6 capture not exercised")
	}

	// Raw TCP with a lease (other_tcp: block_without_lease): passes, and
	// is cut when the lease ends.
	rc := dialWorker(t, raw)
	requirePong(t, rc)

	fc.Signal("t1", api.SignalRevoked, lease.StatusRevoked)
	s.keeper.HeartbeatOnce(t.Context())
	resp, body = doReq(t, worker, "POST", "http://"+up.addr()+"/w", "x", nil)
	captured := problemOf(t, body)
	require.Equal(t, 409, resp.StatusCode, body)
	require.Equal(t, api.ProblemContentType, resp.Header.Get("Content-Type"))
	resp2, body2 := doReq(t, proxyClient(t, s, ""), "POST", "http://"+up.addr()+"/w", "x", nil)
	proxied := problemOf(t, body2)
	require.Equal(t, resp2.StatusCode, resp.StatusCode)
	require.Equal(t, proxied.Type, captured.Type)
	require.Equal(t, api.ProblemTypeBase+CodeLeaseRevoked, captured.Type)
	require.Equal(t, proxied.Title, captured.Title)
	require.Equal(t, proxied.Epoch, captured.Epoch)
	resp, body = doReq(t, worker, "POST", "https://"+upTLS.addr()+"/charge", "amount=5", nil)
	require.Equal(t, 409, resp.StatusCode, body)
	require.Equal(t, api.ProblemTypeBase+CodeLeaseRevoked, problemOf(t, body).Type)
	require.Len(t, up.requests(), 2, "the blocked writes never reached the upstream")
	require.Len(t, upTLS.requests(), 1)
	requireClosed(t, rc, "the raw tunnel is cut when the lease ends")
	requireClosed(t, dialWorker(t, raw), "raw TCP without a lease is refused")

	// other_tcp: allow passes raw TCP without a lease; block refuses it
	// even with one. The rules are moved to each sidecar's listener.
	for _, policy := range []OtherTCP{OtherAllow, OtherBlock} {
		c2 := cfg
		c2.Capture.OtherTCP = policy
		c2.Intercept.BundleFile = t.TempDir() + "/bundle.pem"
		c2.Registerer = nil
		s2 := startSidecar(t, fc, c2)
		p2 := plan
		p2.ListenPort = portOf(t, s2.CaptureAddr())
		require.NoError(t, tables.Install(p2, families))
		if policy == OtherAllow {
			requirePong(t, dialWorker(t, raw))
			continue
		}
		mustAcquire(t, s2, "t2")
		requireClosed(t, dialWorker(t, raw), "other_tcp: block")
	}
	require.NoError(t, tables.Install(plan, families))

	// The sidecar stopped: a captured connection is refused, never passed.
	require.NoError(t, s.Shutdown(t.Context()))
	_, err = capture.DialAs(t.Context(), "", workerUID, "tcp", up.addr(), 2*time.Second)
	require.ErrorIs(t, err, syscall.ECONNREFUSED)

	// Removed: the worker reaches the upstream directly again, unstamped.
	require.NoError(t, tables.Remove(plan, families))
	for _, f := range families {
		require.Empty(t, tables.Installed(plan, f))
	}
	resp, _ = doReq(t, workerClient(t, s), "POST", "http://"+up.addr()+"/direct", "x", nil)
	require.Equal(t, 200, resp.StatusCode)
	last := up.requests()[len(up.requests())-1]
	require.Equal(t, "/direct", last.URI)
	require.Empty(t, last.values(fence.HeaderToken))
}

// workerClient is a client that ignores proxies (Proxy: nil) and dials as
// workerUID, trusting the sidecar's CA bundle (as a captured worker must
// for intercepted hosts).
func workerClient(t *testing.T, s *Sidecar) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if pem, err := os.ReadFile(s.cfg.Intercept.BundleFile); err == nil {
		pool.AppendCertsFromPEM(pem)
	}
	tr := &http.Transport{
		Proxy:              nil,
		DisableCompression: true, // as proxyClient, so the two send the same headers
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return capture.DialAs(ctx, "", workerUID, network, addr, 5*time.Second)
		},
		TLSClientConfig: &tls.Config{RootCAs: pool},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func dialWorker(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := capture.DialAs(t.Context(), "", workerUID, "tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func requirePong(t *testing.T, c net.Conn) {
	t.Helper()
	require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	_, err := io.WriteString(c, "ping\n")
	require.NoError(t, err)
	line, err := bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "pong\n", line)
}

// requireClosed: the connection ends (EOF or reset) without a pong.
func requireClosed(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	_, _ = io.WriteString(c, "ping\n")
	_, err := bufio.NewReader(c).ReadString('\n')
	require.Error(t, err, msg)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "%s: timed out instead of closing", msg)
}

// startPingServer answers "pong" to every line: a protocol the sidecar
// cannot read (it starts with lower-case bytes).
func startPingServer(t *testing.T, addr string) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					if _, err := br.ReadString('\n'); err != nil {
						return
					}
					if _, err := io.WriteString(c, "pong\n"); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-done })
	return ln.Addr().String()
}

func startUpstreamOnAddr(t testing.TB, addr string, h func(*fasthttp.RequestCtx), opts ...func(*fasthttp.Server)) *upstreamServer {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	return startUpstreamOn(t, ln, h, opts...)
}

func portOf(t testing.TB, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	n, err := strconv.Atoi(p)
	require.NoError(t, err)
	return n
}

func headerNames(s seen) []string {
	var out []string
	for _, kv := range s.Header {
		out = append(out, http.CanonicalHeaderKey(kv[0]))
	}
	return out
}
