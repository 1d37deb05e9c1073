package proxy

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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

func TestOriginTableLookup(t *testing.T) {
	o, err := newOriginTable([]TLSOrigin{{Host: "API.example.com"}, {Host: "db.local:8443", ServerName: "db"}})
	require.NoError(t, err)
	require.NotNil(t, o.lookup("api.example.com", ""))
	require.NotNil(t, o.lookup("api.example.com", "8080"))
	require.Nil(t, o.lookup("db.local", ""))
	require.Equal(t, "db", o.lookup("db.local", "8443").ServerName)
	require.Equal(t, "api.example.com", o.forAddr("api.example.com:443").ServerName)
	_, err = newOriginTable([]TLSOrigin{{Host: "x", CAFile: "/nonexistent"}})
	require.ErrorIs(t, err, ErrInvalidConfig)
}
