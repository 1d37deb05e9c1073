package capture

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/proxy/cluster"
	"github.com/fencepost/fencepost/proxy/mitm"
	"github.com/fencepost/fencepost/test/netfault"
	"github.com/fencepost/fencepost/test/netns"
	"github.com/fencepost/fencepost/test/scenario"
)

// insideEnv names the namespace a re-run of this test binary runs in.
const insideEnv = "CAPTURE_E2E_NETNS"

// binaryEnv carries the fencepost binary built outside into the re-run.
const binaryEnv = "CAPTURE_E2E_BINARY"

// sidecarUID is the uid the sidecar runs as, excluded from capture as
// the pod's sidecar is (unique to this test; no other process uses it).
const sidecarUID = 4248

const task = "capture-task"

func TestMain(m *testing.M) {
	code := m.Run()
	netfault.RemoveBinary()
	os.Exit(code)
}

// TestWorkerIgnoringProxiesIsFenced: see the package doc. It runs its body
// in a namespace of its own (a re-run of this binary under ip netns exec),
// so nothing it installs touches the host.
func TestWorkerIgnoringProxiesIsFenced(t *testing.T) {
	if !netns.Inside(insideEnv) {
		netns.Reexec(t, "fpcape2e", insideEnv, binaryEnv+"="+netfault.Binary(t))
		return
	}
	inside(t)
}

func inside(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := sharedDir(t)
	bin := filepath.Join(dir, "fencepost")
	copyFile(t, os.Getenv(binaryEnv), bin)

	cl, err := scenario.StartCluster(ctx, scenario.ClusterConfig{Nodes: 1, Dir: t.TempDir(), TTL: 3 * time.Second})
	require.NoError(t, err)
	defer func() { require.NoError(t, cl.Close()) }()
	cc, err := cluster.New(cluster.Config{Endpoints: cl.Endpoints()})
	require.NoError(t, err)
	defer cc.Close()

	// Upstreams on the namespace's non-loopback addresses.
	ca, err := mitm.New(mitm.Config{Hosts: []string{netns.UpstreamIPv4}})
	require.NoError(t, err)
	caFile := filepath.Join(dir, "upstream-ca.pem")
	require.NoError(t, os.WriteFile(caFile, ca.CertPEM(), 0o644))
	plain := startRecorder(t, netns.UpstreamIPv4, nil)
	leaf, err := ca.Leaf(netns.UpstreamIPv4)
	require.NoError(t, err)
	secure := startRecorder(t, netns.UpstreamIPv4, &tls.Config{Certificates: []tls.Certificate{*leaf}})
	raw := startPing(t, net.JoinHostPort(netns.UpstreamIPv4, "0"))
	var plain6 *recorder
	if ipv6() {
		plain6 = startRecorder(t, "["+netns.UpstreamIPv6+"]", nil)
	}

	captureAddr, proxyAddr, controlAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	bundle := filepath.Join(dir, "bundle.pem")
	sidecar := startSidecar(t, bin, dir, "--cluster", strings.Join(cl.Endpoints(), ","), "--worker-id", "w-capture",
		"--task", task, "--profile", scenario.ProfileName,
		"--proxy-addr", proxyAddr, "--control-addr", controlAddr, "--capture-listen", captureAddr,
		"--intercept-hosts", netns.UpstreamIPv4, "--intercept-bundle-file", bundle, "--intercept-upstream-ca-file", caFile)
	waitReady(t, ctx, controlAddr, sidecar)

	capArgs := []string{"capture", "--cluster", strings.Join(cl.Endpoints(), ","), "--capture-listen", captureAddr,
		"--capture-sidecar-uid", strconv.Itoa(sidecarUID)}
	t.Cleanup(func() { _ = exec.Command(bin, "capture", "--remove").Run() })
	runOK(t, bin, capArgs...)
	runOK(t, bin, "capture", "--check", "--capture-listen", captureAddr)

	// Every worker ignores the proxy it is given.
	bogus := []string{"HTTP_PROXY=http://127.0.0.1:9", "HTTPS_PROXY=http://127.0.0.1:9", "http_proxy=http://127.0.0.1:9", "https_proxy=http://127.0.0.1:9"}
	goClient := directClient(t, bundle)
	workers := directWorkers(t, goClient, bundle, bogus)
	require.NotEmpty(t, workers)
	for _, w := range workers {
		t.Logf("worker: %s (ignores HTTP_PROXY)", w.name)
	}

	// With the lease: every write arrives stamped exactly once.
	for _, w := range workers {
		for _, up := range []*recorder{plain, secure} {
			status, body := w.post(t, up.url()+"/w/"+w.name)
			require.Equal(t, 200, status, "%s to %s: %s", w.name, up.url(), body)
			r := up.last()
			require.Equal(t, "/w/"+w.name, r.path)
			require.Len(t, r.tokens, 1, "%s: stamped exactly once", w.name)
			require.Len(t, r.keys, 1, "%s: one idempotency key", w.name)
		}
	}
	if plain6 != nil {
		status, body := workers[0].post(t, plain6.url()+"/w6")
		require.Equal(t, 200, status, body)
		require.Len(t, plain6.last().tokens, 1, "IPv6: stamped exactly once")
	} else {
		t.Log("no IPv6 in the namespace: IPv6 capture not exercised")
	}
	rc := dial(t, raw)
	requirePong(t, rc) // other_tcp: block_without_lease, with a lease: passes
	require.ErrorIs(t, quic(t), syscall.EPERM, "UDP 443 (QUIC) is refused, so clients fall back to captured TCP")

	// The sidecar's own connections (upstream dials, heartbeats) passed
	// its uid's RETURN rule instead of looping back into it.
	require.Positive(t, ruleCounter(t, "fencepost-capture:sidecar-uid"), "the sidecar's own connections hit the uid exclusion")

	// Revoked: every write is blocked with the problem a proxied call gets.
	g := plain.last().tokens[0]
	epoch, _ := strconv.ParseUint(g, 10, 64)
	_, err = cc.Revoke(ctx, task, api.RevokeRequest{Epoch: epoch, Reason: "capture test"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { s, _ := workers[0].post(t, plain.url()+"/w/probe"); return s == 409 }, 20*time.Second, 50*time.Millisecond)
	// The proxied reference call is made once the sidecar knows of the
	// revocation: made earlier it races it (and may be cut in flight).
	proxied := viaProxy(t, proxyAddr, plain.url()+"/w/proxied")
	require.Equal(t, 409, proxied.status)
	before := [2]int{plain.count(), secure.count()}
	for _, w := range workers {
		for _, up := range []*recorder{plain, secure} {
			status, body := w.post(t, up.url()+"/w/"+w.name)
			require.Equal(t, proxied.status, status, "%s to %s: %s", w.name, up.url(), body)
			var p api.Problem
			require.NoError(t, json.Unmarshal([]byte(body), &p), body)
			require.Equal(t, proxied.problem.Type, p.Type, "%s: same problem as a proxied call", w.name)
			require.Equal(t, proxied.problem.Title, p.Title)
		}
	}
	require.Equal(t, before, [2]int{plain.count(), secure.count()}, "no blocked write reached an upstream")
	requireClosed(t, rc, "the raw tunnel is cut with the lease")
	requireClosed(t, dial(t, raw), "raw TCP without a lease is refused")

	// The sidecar stopped: captured connections are refused, never passed.
	sidecar.stop(t)
	_, err = net.DialTimeout("tcp", plain.addr, 2*time.Second)
	require.ErrorIs(t, err, syscall.ECONNREFUSED, "with the sidecar down a captured connection is refused")

	// Removed: nothing tagged is left, and the worker goes direct.
	runOK(t, bin, "capture", "--remove")
	runOK(t, bin, "capture", "--remove")
	save, err := exec.Command("iptables-save", "-t", "nat").CombinedOutput()
	require.NoError(t, err)
	require.NotContains(t, string(save), "fencepost-capture")
	if out, err := exec.Command("ip6tables-save", "-t", "nat").CombinedOutput(); err == nil {
		require.NotContains(t, string(out), "fencepost-capture")
	}
	require.NoError(t, quic(t), "after --remove UDP 443 leaves again")
	status, _ := workers[0].post(t, plain.url()+"/direct")
	require.Equal(t, 200, status)
	require.Empty(t, plain.last().tokens, "without capture the write goes direct, unstamped")
}

// quic sends one datagram to UDP 443 of the upstream address.
func quic(t *testing.T) error {
	c, err := net.Dial("udp", net.JoinHostPort(netns.UpstreamIPv4, "443"))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write([]byte("quic initial"))
	return err
}

// worker is one client that ignores proxy settings.
type worker struct {
	name string
	post func(t *testing.T, url string) (status int, body string)
}

func directWorkers(t *testing.T, c *http.Client, bundle string, env []string) []worker {
	ws := []worker{{name: "go", post: func(t *testing.T, url string) (int, string) {
		resp, err := c.Post(url, "text/plain", strings.NewReader("x"))
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}}}
	if _, err := exec.LookPath("curl"); err == nil {
		ws = append(ws, worker{name: "curl", post: func(t *testing.T, url string) (int, string) {
			out := runEnv(t, env, "curl", "-sS", "--noproxy", "*", "--cacert", bundle, "-X", "POST", "-d", "x",
				"-w", "\n%{http_code}", url)
			i := strings.LastIndex(out, "\n")
			code, _ := strconv.Atoi(strings.TrimSpace(out[i+1:]))
			return code, out[:i]
		}})
	} else {
		t.Log("curl not installed: the curl worker is skipped")
	}
	py := `import sys, ssl, urllib.request, urllib.error
ctx = ssl.create_default_context(cafile=sys.argv[2])
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ctx))
try:
    r = opener.open(urllib.request.Request(sys.argv[1], data=b"x", method="POST"))
    print(r.read().decode()); print(r.status)
except urllib.error.HTTPError as e:
    print(e.read().decode()); print(e.code)
`
	pyRequests := `import sys, requests
s = requests.Session(); s.trust_env = False
r = s.post(sys.argv[1], data=b"x", verify=sys.argv[2])
print(r.text); print(r.status_code)
`
	if _, err := exec.LookPath("python3"); err == nil {
		ws = append(ws, worker{name: "python-urllib", post: pyWorker(env, py, bundle)})
		if exec.Command("python3", "-c", "import requests").Run() == nil {
			ws = append(ws, worker{name: "python-requests", post: pyWorker(env, pyRequests, bundle)})
		} else {
			t.Log("python3 requests not installed: the requests worker is skipped")
		}
	} else {
		t.Log("python3 not installed: the Python workers are skipped")
	}
	return ws
}

func pyWorker(env []string, script, bundle string) func(t *testing.T, url string) (int, string) {
	return func(t *testing.T, url string) (int, string) {
		out := strings.TrimRight(runEnv(t, env, "python3", "-c", script, url, bundle), "\n")
		i := strings.LastIndex(out, "\n")
		code, _ := strconv.Atoi(strings.TrimSpace(out[i+1:]))
		return code, out[:max(i, 0)]
	}
}

// directClient is Go with Proxy: nil, trusting the sidecar's CA.
func directClient(t *testing.T, bundle string) *http.Client {
	pem, err := os.ReadFile(bundle)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pem))
	tr := &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{RootCAs: pool}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}
