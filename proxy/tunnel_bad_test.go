package proxy

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/proxy/mitm"
)

// roundTrip writes raw on c and reads one response.
func roundTrip(t *testing.T, c net.Conn, br *bufio.Reader, raw string) (*http.Response, string) {
	t.Helper()
	_, err := io.WriteString(c, raw)
	require.NoError(t, err)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return resp, string(b)
}

// TestPlainHTTPInsideConnectIsFenced is Node's fetch with
// NODE_USE_ENV_PROXY: it tunnels http:// URLs with CONNECT.
func TestPlainHTTPInsideConnectIsFenced(t *testing.T) {
	up := startUpstream(t, nil)
	fc := newFakeCluster()
	s := startSidecar(t, fc, baseConfig(t))

	c, br, resp := dialConnect(t, s.ProxyAddr(), up.addr(), "t1")
	require.Equal(t, 200, resp.StatusCode)
	resp, body := roundTrip(t, c, br, "POST /w HTTP/1.1\r\nHost: "+up.addr()+"\r\nContent-Length: 1\r\n\r\nx")
	require.Equal(t, 409, resp.StatusCode, "no lease yet: %s", body)
	require.Equal(t, "false", resp.Header.Get(HeaderShouldRetry))
	require.Empty(t, up.requests())

	mustAcquire(t, s, "t1")
	resp, body = roundTrip(t, c, br, "POST /w HTTP/1.1\r\nHost: "+up.addr()+"\r\nContent-Length: 1\r\n\r\nx")
	require.Equal(t, 200, resp.StatusCode, body)
	reqs := up.requests()
	require.Len(t, reqs, 1)
	require.Len(t, reqs[0].values("X-Fencing-Token"), 1)
	require.Len(t, reqs[0].values("Idempotency-Key"), 1)
	require.Equal(t, up.addr(), reqs[0].Host)

	// Domain fronting: the Host must name the CONNECT target.
	resp, body = roundTrip(t, c, br, "POST /w HTTP/1.1\r\nHost: other.example\r\nContent-Length: 1\r\n\r\nx")
	require.Equal(t, 421, resp.StatusCode, body)
	require.Equal(t, api.ProblemTypeBase+CodeHostMismatch, problemOf(t, body).Type)
	require.Len(t, up.requests(), 1)
}

func TestTunnelAbsoluteFormMustNameTheTarget(t *testing.T) {
	up := startUpstream(t, nil)
	s := startSidecar(t, newFakeCluster(), baseConfig(t))
	mustAcquire(t, s, "t1")
	c, br, _ := dialConnect(t, s.ProxyAddr(), up.addr(), "t1")
	resp, body := roundTrip(t, c, br, "GET http://evil.example/x HTTP/1.1\r\nHost: "+up.addr()+"\r\n\r\n")
	require.Equal(t, 421, resp.StatusCode, body)
	c, br, _ = dialConnect(t, s.ProxyAddr(), up.addr(), "t1")
	resp, body = roundTrip(t, c, br, "GET http://"+up.addr()+"/x HTTP/1.1\r\nHost: "+up.addr()+"\r\n\r\n")
	require.Equal(t, 200, resp.StatusCode, body)
	require.Equal(t, "/x", up.requests()[0].URI)
}

func TestConnectRefusalSaysWhyInTheStatusLine(t *testing.T) {
	s := startSidecar(t, newFakeCluster(), baseConfig(t))
	_, _, resp := dialConnect(t, s.ProxyAddr(), "api.example.com:443", "")
	require.Equal(t, 403, resp.StatusCode)
	require.Contains(t, resp.Status, "not intercepted")
	require.Contains(t, resp.Status, "api.example.com:443")
	b, _ := io.ReadAll(resp.Body)
	require.Contains(t, problemOf(t, string(b)).Detail, "intercept.hosts")
}

// expectClosed waits for the sidecar to close c without an HTTP answer
// (a TLS alert is all a broken handshake gets).
func expectClosed(t *testing.T, c net.Conn, br *bufio.Reader) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	b, err := io.ReadAll(br)
	require.NoError(t, err, "the sidecar must close the tunnel")
	if len(b) > 0 {
		require.Equal(t, byte(0x15), b[0], "only a TLS alert may come back, got %q", b)
	}
}

func TestTunnelBadFirstBytesAreClosed(t *testing.T) {
	up := startUpstream(t, nil)
	cfg := interceptConfig(t, "")
	cfg.Intercept.HandshakeTimeout = 300 * time.Millisecond
	s := startSidecar(t, newFakeCluster(), cfg)
	mustAcquire(t, s, "t1")
	for name, first := range map[string]string{
		"garbage":           "\x00\x01\x02garbage\r\n\r\n",
		"http2 preface":     "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
		"garbage hello":     "\x16\x03\x01\x00\x05hello-not-a-clienthello",
		"lower-case line":   "get / HTTP/1.1\r\n\r\n",
		"slow (nothing)":    "",
		"half request":      "GET",
		"oversized record":  "\x16\x03\x01\xff\xff" + strings.Repeat("A", 100),
		"stalled handshake": "\x16\x03\x01\x02\x00\x01\x00",
	} {
		t.Run(name, func(t *testing.T) {
			c, br, resp := dialConnect(t, s.ProxyAddr(), up.addr(), "t1")
			require.Equal(t, 200, resp.StatusCode)
			if first != "" {
				_, err := io.WriteString(c, first)
				require.NoError(t, err)
			}
			expectClosed(t, c, br)
		})
	}
	require.Empty(t, up.requests())
	requireTunnels(t, s, "closed", 8)
	// The sidecar still serves.
	c, br, _ := dialConnect(t, s.ProxyAddr(), up.addr(), "t1")
	resp, body := roundTrip(t, c, br, "GET / HTTP/1.1\r\nHost: "+up.addr()+"\r\n\r\n")
	require.Equal(t, 200, resp.StatusCode, body)
	requireTunnels(t, s, "http", 1)
	requireTunnels(t, s, "intercepted", 0)
}

func TestInterceptedSNIMustMatchConnect(t *testing.T) {
	s := startSidecar(t, newFakeCluster(), interceptConfig(t, ""))
	c, _, resp := dialConnect(t, s.ProxyAddr(), "127.0.0.1:1", "")
	require.Equal(t, 200, resp.StatusCode)
	pool := caPool(t, s)
	tc := tls.Client(c, &tls.Config{ServerName: "bank.example", RootCAs: pool})
	require.Error(t, tc.Handshake())

	// An h2-only client gets no tunnel it would speak HTTP/2 in.
	c, _, _ = dialConnect(t, s.ProxyAddr(), "127.0.0.1:1", "")
	tc = tls.Client(c, &tls.Config{ServerName: "127.0.0.1", RootCAs: pool, NextProtos: []string{"h2"}})
	require.Error(t, tc.Handshake())
}

func caPool(t *testing.T, s *Sidecar) *x509Pool {
	t.Helper()
	info, ok := s.CA()
	require.True(t, ok)
	p := newX509Pool()
	require.True(t, p.AppendCertsFromPEM([]byte(info.CertificatePEM)))
	return p
}

func TestUpstreamTLSFailuresName(t *testing.T) {
	good := newTestCA(t, mitm.Config{Hosts: []string{"*"}})
	other := newTestCA(t, mitm.Config{Hosts: []string{"*"}})
	past := time.Now().Add(-72 * time.Hour)
	expired := newTestCA(t, mitm.Config{Hosts: []string{"*"}, Validity: time.Hour, Now: func() time.Time { return past }})
	for name, tc := range map[string]struct {
		ca     testCA
		leaf   string
		reason string
	}{
		"unknown authority": {other, "127.0.0.1", "unknown authority"},
		"wrong name":        {good, "other.example", "not valid for 127.0.0.1"},
		"expired":           {expired, "127.0.0.1", "expired"},
	} {
		t.Run(name, func(t *testing.T) {
			up := startTLSUpstream(t, tc.ca, tc.leaf, nil)
			// The sidecar trusts good and expired (so expiry is what fails).
			bundle := good.file + ".both"
			require.NoError(t, appendFiles(bundle, good.file, expired.file))
			s := startSidecar(t, newFakeCluster(), interceptConfig(t, bundle))
			mustAcquire(t, s, "t1")
			resp, body := post(t, httpsClient(t, s, "t1"), "https://"+up.addr()+"/w", "x")
			require.Equal(t, 502, resp.StatusCode, body)
			p := problemOf(t, body)
			require.Equal(t, api.ProblemTypeBase+CodeUpstreamTLS, p.Type)
			require.Contains(t, p.Detail, tc.reason)
			require.Empty(t, up.requests())
		})
	}
}

// TestHugeHeaderGets431 sends a 2 MiB header: the worker reads a 431
// problem instead of a connection reset, on the proxy port and inside a
// tunnel.
func TestHugeHeaderGets431(t *testing.T) {
	up := startUpstream(t, nil)
	s := startSidecar(t, newFakeCluster(), baseConfig(t))
	huge := "X-Big: " + strings.Repeat("a", 2<<20) + "\r\n"
	check := func(c net.Conn, br *bufio.Reader, target string) {
		// Like curl: the whole request is written before the reply is
		// read, so a close without lingering resets the write.
		_, err := io.WriteString(c, "GET "+target+" HTTP/1.1\r\nHost: "+up.addr()+"\r\n"+huge+"\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		require.Equal(t, fasthttp.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
		require.Equal(t, api.ProblemTypeBase+CodeHeaderTooLarge, problemOf(t, string(b)).Type)
		_ = c.Close()
	}
	c, err := net.Dial("tcp", s.ProxyAddr())
	require.NoError(t, err)
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	check(c, bufio.NewReader(c), "http://"+up.addr()+"/")
	tc, br, _ := dialConnect(t, s.ProxyAddr(), up.addr(), "")
	require.NoError(t, tc.SetDeadline(time.Now().Add(10*time.Second)))
	check(tc, br, "/")
	require.Empty(t, up.requests())
}

// TestTunnelExpectContinue: curl sends "Expect: 100-continue" with larger
// bodies; inside a tunnel a write without a lease is refused before the
// body is uploaded, and with one the body is asked for and forwarded.
func TestTunnelExpectContinue(t *testing.T) {
	up := startUpstream(t, nil)
	fc := newFakeCluster()
	s := startSidecar(t, fc, baseConfig(t))
	head := "POST /w HTTP/1.1\r\nHost: " + up.addr() + "\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"

	c, br, _ := dialConnect(t, s.ProxyAddr(), up.addr(), "t1")
	_, err := io.WriteString(c, head)
	require.NoError(t, err)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, 409, resp.StatusCode, "refused before the body")

	mustAcquire(t, s, "t1")
	c, br, _ = dialConnect(t, s.ProxyAddr(), up.addr(), "t1")
	_, err = io.WriteString(c, head)
	require.NoError(t, err)
	line, err := br.ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, line, "100 Continue")
	_, err = br.ReadString('\n') // the blank line ending the interim response
	require.NoError(t, err)
	_, err = io.WriteString(c, "hello")
	require.NoError(t, err)
	resp, err = http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "hello", up.requests()[0].Body)
}
