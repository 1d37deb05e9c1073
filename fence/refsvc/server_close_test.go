package refsvc

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// Close right after Start returns, however the Serve goroutine is
// scheduled (it used to wait forever when Close won the race).
func TestCloseRightAfterStart(t *testing.T) {
	for i := range 50 {
		reg := prometheus.NewRegistry()
		s, err := New(Config{Addr: "127.0.0.1:0", Registerer: reg, Gatherer: reg})
		require.NoError(t, err)
		require.NoError(t, s.Start())
		done := make(chan error, 1)
		go func() { done <- s.Close() }()
		select {
		case err := <-done:
			require.NoError(t, err, "round %d", i)
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d: Close right after Start did not return", i)
		}
	}
}
