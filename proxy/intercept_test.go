package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// statusOf is the status of a GET of url.
func statusOf(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// TestCARouteServesTheWorkerOnly: GET /v1/ca is on the loopback control
// API (the worker's), never on the metrics address, which may be
// reachable off the pod; the CA's private key is in neither answer.
func TestCARouteServesTheWorkerOnly(t *testing.T) {
	cfg := interceptConfig(t, "")
	cfg.MetricsAddr = "127.0.0.1:0"
	s := startSidecar(t, newFakeCluster(), cfg)

	code, body := ctl(t, s, "GET", PathCA, "")
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
	code, pem := ctl(t, s, "GET", PathCAPEM, "")
	require.Equal(t, 200, code)
	require.Equal(t, info.CertificatePEM, pem)
	require.NotContains(t, body+pem+string(bundle), "PRIVATE KEY")

	for _, p := range []string{PathCA, PathCAPEM} {
		require.Equal(t, 404, statusOf(t, "http://"+s.MetricsAddr()+p), "the metrics address must not serve %s", p)
	}

	// The metrics say when the CA expires, to the second, for the alert.
	resp, err := http.Get("http://" + s.MetricsAddr() + PathMetrics)
	require.NoError(t, err)
	metrics, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	_ = resp.Body.Close()
	want := fmt.Sprintf("fencepost_sidecar_intercept_ca_expiry_timestamp_seconds %s",
		strconv.FormatFloat(float64(info.NotAfter.Unix()), 'e', -1, 64))
	require.Contains(t, string(metrics), want)
}

func TestCARouteWithoutInterception(t *testing.T) {
	s := startSidecar(t, newFakeCluster(), baseConfig(t))
	code, body := ctl(t, s, "GET", PathCA, "")
	require.Equal(t, 404, code)
	require.Contains(t, body, "intercept.hosts")
}
