package leases

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRetryDelayJitteredAndBounded(t *testing.T) {
	for fails := 1; fails < 12; fails++ {
		d := retryDelay(fails, 4*time.Second)
		require.GreaterOrEqual(t, d, retryBase/2)
		require.LessOrEqual(t, d, time.Second, "capped at a quarter of the interval")
	}
	require.LessOrEqual(t, retryDelay(50, 100*time.Millisecond), retryBase)
}
