package console

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const exposition = `# HELP fencepost_cluster_lease_expired_total x
# TYPE fencepost_cluster_lease_expired_total counter
fencepost_cluster_lease_expired_total 3
fencepost_cluster_lease_reclaimed_total 2
fencepost_cluster_resume_success_total 1
fencepost_cluster_apply_errors_total{code="stale_epoch",op="intent"} 4
fencepost_cluster_apply_errors_total{code="not_holder",op="intent"} 100
fencepost_sidecar_writes_blocked_total{reason="revoked"} 5
fencepost_cluster_paused_waiting_seconds_sum 12.5
fencepost_cluster_paused_waiting_seconds_count 2
fencepost_cluster_double_execution_alarms_total{kind="acquire_held"} 1
fencepost_cluster_double_execution_alarms_total{kind="heartbeat_foreign_lease"} 0
`

func TestTotalsSumTheFiveMetrics(t *testing.T) {
	require.Equal(t, map[string]float64{"expired": 3, "reclaimed": 2, "resumed": 1, "fencing": 9, "waiting": 12.5, "alarms": 1},
		totals(strings.NewReader(exposition)))
}

func TestRingKeepsPerMinuteIncreasesForAnHour(t *testing.T) {
	r := newRing()
	t0 := time.Date(2026, 1, 1, 10, 0, 30, 0, time.UTC)
	r.add(t0, "u", map[string]float64{"expired": 10})
	r.add(t0.Add(10*time.Second), "u", map[string]float64{"expired": 12})
	r.add(t0.Add(time.Minute), "u", map[string]float64{"expired": 15})
	r.add(t0.Add(2*time.Minute), "u", map[string]float64{"expired": 1}) // restarted
	pts := r.lastHour(t0.Add(2*time.Minute), "expired")
	require.Len(t, pts, window)
	require.Equal(t, []float64{2, 3, 1}, []float64{pts[57].Value, pts[58].Value, pts[59].Value})
	require.Equal(t, t0.Truncate(time.Minute).Add(2*time.Minute), pts[59].Minute.UTC())
	// An hour later the old minutes are gone.
	late := t0.Add(62 * time.Minute)
	var sum float64
	for _, p := range r.lastHour(late, "expired") {
		sum += p.Value
	}
	require.Zero(t, sum)
}
