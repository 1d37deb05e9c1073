package proxy

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMetricsAddrServesOnlyOperationalRoutes: the optional metrics
// listener (reachable by kubelet and Prometheus) exposes metrics, health
// and readiness, and never the control API that changes leases.
func TestMetricsAddrServesOnlyOperationalRoutes(t *testing.T) {
	cfg := baseConfig(t)
	cfg.MetricsAddr = "127.0.0.1:0"
	s := startSidecar(t, newFakeCluster(), cfg)
	base := "http://" + s.MetricsAddr()
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get(PathMetrics)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "fencepost_sidecar_requests_total")
	code, _ = get(PathHealth)
	require.Equal(t, http.StatusOK, code)
	code, _ = get(PathLease)
	require.Equal(t, http.StatusNotFound, code)
	resp, err := http.Post(base+PathAcquire, "application/json", strings.NewReader(`{"taskId":"t1"}`))
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)

	bad := baseConfig(t)
	bad.MetricsAddr = "nonsense"
	require.ErrorIs(t, bad.Validate(), ErrInvalidConfig)
}
