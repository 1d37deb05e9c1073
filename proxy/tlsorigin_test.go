package proxy

import (
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/proxy/mitm"
)

func TestTLSOrigination(t *testing.T) {
	var gotToken, gotHost string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotToken, gotHost = r.Header.Get("X-Fencing-Token"), r.Host
		_, _ = w.Write([]byte("secure"))
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600))
	hostPort := strings.TrimPrefix(srv.URL, "https://")

	fc := newFakeCluster()
	cfg := baseConfig(t)
	cfg.TLSOriginate = []TLSOrigin{{Host: hostPort, CAFile: ca}}
	s := startSidecar(t, fc, cfg)
	mustAcquire(t, s, "t")
	resp, body := doReq(t, proxyClient(t, s, ""), "POST", "http://"+hostPort+"/pay", "x", nil)
	require.Equal(t, 200, resp.StatusCode, body)
	require.Equal(t, "secure", body)
	require.Equal(t, "101", gotToken)
	require.Equal(t, hostPort, gotHost)

	// Without the CA the certificate is not trusted: verification is on.
	cfg2 := baseConfig(t)
	cfg2.TLSOriginate = []TLSOrigin{{Host: hostPort}}
	s2 := startSidecar(t, newFakeCluster(), cfg2)
	resp, body = doReq(t, proxyClient(t, s2, ""), "GET", "http://"+hostPort+"/", "", nil)
	require.Equal(t, 502, resp.StatusCode, body)
}

func TestTLSOriginationHintsNameHostAndPort(t *testing.T) {
	ca := newTestCA(t, mitm.Config{Hosts: []string{"127.0.0.1"}})
	up := startTLSUpstream(t, ca, "127.0.0.1", nil)
	cfg := baseConfig(t)
	cfg.TLSOriginate = []TLSOrigin{{Host: "127.0.0.1:1", CAFile: ca.file}}
	s := startSidecar(t, newFakeCluster(), cfg)
	mustAcquire(t, s, "t")
	c := proxyClient(t, s, "")

	// An https:// URL in absolute form: the fix names the host and port.
	req, _ := http.NewRequest("GET", "http://"+s.ProxyAddr(), nil)
	req.URL.Opaque = "https://api.example.com:8443/x"
	req.Host = "api.example.com:8443"
	resp, err := (&http.Client{}).Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, 400, resp.StatusCode)
	require.Contains(t, problemOf(t, string(b)).Detail, "http://api.example.com:8443 with api.example.com:8443 in tls.originate")

	// A TLS port tls.originate does not list: the 502 says so.
	resp, body := doReq(t, c, "POST", "http://"+up.addr()+"/w", "x", nil)
	require.Equal(t, 502, resp.StatusCode, body)
	require.Contains(t, problemOf(t, body).Detail, "tls.originate lists 127.0.0.1:1; list "+up.addr())
}
