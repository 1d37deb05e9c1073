package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/mitm"
)

// testCA is an upstream's CA, written to a file the sidecar can trust.
type testCA struct {
	ca   *mitm.CA
	file string
}

func newTestCA(t *testing.T, cfg mitm.Config) testCA {
	t.Helper()
	ca, err := mitm.New(cfg)
	require.NoError(t, err)
	f := filepath.Join(t.TempDir(), "upstream-ca.pem")
	require.NoError(t, os.WriteFile(f, ca.CertPEM(), 0o600))
	return testCA{ca: ca, file: f}
}

// startTLSUpstream serves the recording upstream over TLS with a leaf of
// ca for name.
func startTLSUpstream(t *testing.T, ca testCA, name string, h func(*fasthttp.RequestCtx)) *upstreamServer {
	t.Helper()
	leaf, err := ca.ca.Leaf(name)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return startUpstreamOn(t, tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{*leaf}}), h)
}

// interceptConfig intercepts 127.0.0.1 and trusts upstreamCA upstream.
func interceptConfig(t *testing.T, upstreamCA string) Config {
	cfg := baseConfig(t)
	cfg.Intercept = Intercept{Hosts: []string{"127.0.0.1"}, BundleFile: filepath.Join(t.TempDir(), "bundle.pem"),
		UpstreamCAFile: upstreamCA, HandshakeTimeout: 2 * time.Second}
	return cfg
}

// httpsClient is a worker's client: HTTPS_PROXY = the sidecar as user,
// trusting only the bundle the sidecar wrote.
func httpsClient(t *testing.T, s *Sidecar, user string) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(s.cfg.Intercept.BundleFile)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pem))
	pu := &url.URL{Scheme: "http", Host: s.ProxyAddr()}
	if user != "" {
		pu.User = url.User(user)
	}
	tr := &http.Transport{Proxy: http.ProxyURL(pu), TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: false}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func post(t *testing.T, c *http.Client, u, body string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Post(u, "text/plain", strings.NewReader(body))
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	_ = resp.Body.Close()
	return resp, string(b)
}

func TestInterceptedWriteIsStampedThenBlocked(t *testing.T) {
	ca := newTestCA(t, mitm.Config{Hosts: []string{"127.0.0.1"}})
	up := startTLSUpstream(t, ca, "127.0.0.1", nil)
	fc := newFakeCluster()
	s := startSidecar(t, fc, interceptConfig(t, ca.file))
	g := mustAcquire(t, s, "t1")
	c := httpsClient(t, s, "t1")

	resp, body := post(t, c, "https://"+up.addr()+"/charge", "amount=5")
	require.Equal(t, 200, resp.StatusCode, body)
	reqs := up.requests()
	require.Len(t, reqs, 1)
	require.Equal(t, []string{strconv.FormatUint(g.Lease.Epoch, 10)}, reqs[0].values(fence.HeaderToken))
	require.Len(t, reqs[0].values(fence.HeaderIdempotencyKey), 1)
	require.Empty(t, reqs[0].values("Proxy-Authorization"))
	require.Equal(t, "/charge", reqs[0].URI)
	requireTunnels(t, s, "intercepted", 1)

	// Revoked: a 409 problem the client can read inside TLS, nothing sent.
	fc.Signal("t1", api.SignalRevoked, lease.StatusRevoked)
	s.keeper.HeartbeatOnce(t.Context())
	resp, body = post(t, c, "https://"+up.addr()+"/charge", "amount=5")
	require.Equal(t, 409, resp.StatusCode, body)
	require.Equal(t, api.ProblemContentType, resp.Header.Get("Content-Type"))
	require.Equal(t, "false", resp.Header.Get(HeaderShouldRetry))
	require.Equal(t, api.ProblemTypeBase+CodeLeaseRevoked, problemOf(t, body).Type)
	require.Len(t, up.requests(), 1)
}

type x509Pool = x509.CertPool

func newX509Pool() *x509Pool { return x509.NewCertPool() }

func appendFiles(dst string, srcs ...string) error {
	var all []byte
	for _, s := range srcs {
		b, err := os.ReadFile(s)
		if err != nil {
			return err
		}
		all = append(all, b...)
	}
	return os.WriteFile(dst, all, 0o600)
}
