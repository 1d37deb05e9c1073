package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/fencepost/fencepost/test/netfault"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, netfault.LeakOptions()...)
}

// TestSeedFailureCase plays the seed's failure case end to end and
// requires every guarantee to hold; on failure it prints the timeline.
func TestSeedFailureCase(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out bytes.Buffer
	sum, err := Run(ctx, Config{Out: &out, Dir: t.TempDir()})
	t.Logf("timeline:\n%s", out.String())
	require.NoError(t, err)
	require.True(t, sum.OK, "reasons: %v", sum.Reasons)
	require.Len(t, sum.Epochs, 2)
	require.Greater(t, sum.Epochs[1], sum.Epochs[0])
	require.Zero(t, sum.AcceptedStale)
	require.Zero(t, sum.DoubleExecution)
	require.Positive(t, sum.BlockedBySidecar)
	require.Positive(t, sum.RejectedStaleDownstream)
	require.True(t, sum.ResumedFromCheckpoint)
	// Reclaim is two-phase and guarded: every status was seen, in order.
	require.Equal(t, []string{"active", "suspect_dead", "expired", "reclaimed"}, sum.Transitions)

	// The last line is the summary as one JSON object.
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var last map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &last))
	for _, k := range []string{"epochs", "writes_accepted", "blocked_by_sidecar", "rejected_stale_downstream", "accepted_stale", "double_execution", "ok"} {
		require.Contains(t, last, k)
	}
	require.Equal(t, true, last["ok"])
}
