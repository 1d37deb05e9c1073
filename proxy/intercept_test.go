package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func getBody(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// TestCARouteServesTheWorkerOnly: GET /v1/ca is on the loopback control
// API (the worker's), never on the metrics address, which may be
// reachable off the pod; the CA's private key is in neither answer.
func TestCARouteServesTheWorkerOnly(t *testing.T) {
	cfg := interceptConfig(t, "")
	cfg.MetricsAddr = "127.0.0.1:0"
	s := startSidecar(t, newFakeCluster(), cfg)

	code, body := getBody(t, "http://"+s.ControlAddr()+PathCA)
	require.Equal(t, 200, code, body)
	var info CAInfo
	require.NoError(t, json.Unmarshal([]byte(body), &info))
	require.Equal(t, cfg.Intercept.BundleFile, info.BundleFile)
	require.True(t, info.Constrained)
	for _, v := range CAEnvVars {
		require.Equal(t, cfg.Intercept.BundleFile, info.Env[v])
	}
	bundle, err := os.ReadFile(info.BundleFile)
	require.NoError(t, err)
	require.Contains(t, string(bundle), info.CertificatePEM)
	code, pem := getBody(t, "http://"+s.ControlAddr()+PathCAPEM)
	require.Equal(t, 200, code)
	require.Equal(t, info.CertificatePEM, pem)
	require.NotContains(t, body+pem+string(bundle), "PRIVATE KEY")

	for _, p := range []string{PathCA, PathCAPEM} {
		code, _ = getBody(t, "http://"+s.MetricsAddr()+p)
		require.Equal(t, 404, code, "the metrics address must not serve %s", p)
	}
}

func TestCARouteWithoutInterception(t *testing.T) {
	s := startSidecar(t, newFakeCluster(), baseConfig(t))
	code, body := getBody(t, "http://"+s.ControlAddr()+PathCA)
	require.Equal(t, 404, code)
	require.Contains(t, body, "intercept.hosts")
}
