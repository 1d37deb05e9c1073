package nemesis

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A loss a worker no fault touched is a problem while the run goes on;
// one it saw once the run stopped its workers is the stop's doing (the
// sidecar gives a stopped worker's lease back and cuts its write).
func TestUntouchedLossCountsOnlyBeforeTheStop(t *testing.T) {
	h := newHistory()
	stopped := time.Now()
	h.loss(Loss{At: stopped.Add(-time.Millisecond), Worker: "w1", Task: "t1", Epoch: 7, Why: "write cut_in_flight (lease-lost-in-flight)"})
	h.loss(Loss{At: stopped.Add(time.Millisecond), Worker: "w2", Task: "t2", Epoch: 9, Why: "write cut_in_flight (lease-lost-in-flight)"})
	h.loss(Loss{At: stopped.Add(-time.Second), Worker: "w3", Task: "t3", Epoch: 11, Why: "checkpoint: lost"})
	h.touch("w3", stopped.Add(-2*time.Second), stopped.Add(-time.Second/2))

	bad := h.CheckUntouchedLeases(nil, stopped)
	require.Len(t, bad, 1, "history:\n%s", h)
	require.Contains(t, bad[0], "w1, untouched by any fault, lost t1 epoch 7")

	require.Len(t, h.CheckUntouchedLeases(nil, time.Time{}), 2, "with no stop, every untouched loss counts")
}
