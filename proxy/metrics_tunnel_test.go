package proxy

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// requireTunnels waits until fencepost_sidecar_tunnels_total{kind} of s
// reads want: a fenced tunnel is counted on its own goroutine, once its
// first bytes are read.
func requireTunnels(t *testing.T, s *Sidecar, kind string, want float64) {
	t.Helper()
	read := func() float64 { return seriesValue(t, s, "fencepost_sidecar_tunnels_total", kind) }
	require.Eventually(t, func() bool { return read() == want }, 5*time.Second, 10*time.Millisecond,
		"tunnels_total{kind=%q}: got %v, want %v", kind, read(), want)
}
