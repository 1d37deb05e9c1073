package nemesis

import (
	"context"
	"fmt"
	"time"

	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/test/scenario"
)

// probeDelay is when, after a sidecar is cut from the cluster, the nemesis
// writes through it itself: a second past the TTL, when the sidecar's
// local deadline has passed whatever its last renewal was (a renewal
// answered before the cut gives at most TTL from the cut), and before the
// task is reclaimed.
const probeDelay = TTL + time.Second

// probeLateWrite sends one write through the cut-off sidecar of w under
// the lease it held when the fault started. The sidecar cannot hear from
// the cluster, so only its own deadline (I4) can refuse it: unlike a write
// the worker happens to make, this one is certain to be sent after the
// deadline, so a sidecar that forgot its deadline is caught on every
// partition, not only when its worker is mid-task.
func (r *Run) probeLateWrite(ctx context.Context, w *Worker, f *Fault) {
	if f.Task == "" {
		r.H.Logf("nemesis", "probe skipped: %s held no lease when cut off", w.Name)
		return
	}
	key := fmt.Sprintf("%s/%d/probe-%d", w.Name, f.Epoch, len(r.Faults))
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res := w.w.WriteKey(cctx, r.Sys.Recorder.URL(f.Task), f.Task, key, []byte(`{"probe":true}`))
	r.H.op()
	after := res.Sent.Sub(f.Start).Round(time.Millisecond)
	switch res.Outcome {
	case scenario.BlockedBySidecar:
		r.H.Logf("nemesis", "probe: %s's sidecar refused a write on %s epoch=%d %v after the cut (%s)", w.Name, f.Task, f.Epoch, after, res.Code)
	case scenario.Accepted:
		msg := fmt.Sprintf("%s: the sidecar of %s forwarded a write on %s epoch=%d %v after it was cut from the cluster (its deadline is at most %v after the cut)",
			f, w.Name, f.Task, f.Epoch, after, TTL)
		r.H.Logf("nemesis", "probe: %s", msg)
		r.late = append(r.late, msg)
	default:
		// Anything else is not a forwarded write (the recorder would show
		// one): the sidecar failed the call another way.
		r.H.Logf("nemesis", "probe on %s epoch=%d: %s %d %s %v", f.Task, f.Epoch, res.Outcome, res.Status, res.Code, res.Err)
	}
}

// lateSlack is how much later than the cluster's expiry a write may be
// stamped by the recorder before it counts as late: the recorder's own
// goroutine can be scheduled late on a loaded machine. The real margin is
// larger still (the sidecar's deadline comes a grace period earlier).
const lateSlack = 500 * time.Millisecond

// CheckLateWrites reports every write that reached the recorder after the
// cluster had already expired or reclaimed the lease it was made under. A
// sidecar's deadline comes at least the grace period before the cluster
// expires the lease (I4), so such a write left the sidecar after its
// deadline — even when no newer owner had written yet, which
// CheckRecorder alone would not see.
func CheckLateWrites(log []Arrival, tasks map[string]lease.Task) []string {
	var bad []string
	for _, a := range log {
		t, ok := tasks[a.Task]
		if !ok {
			continue
		}
		for _, l := range leasesOf(t) {
			if l.Epoch != a.Epoch || (l.Status != lease.StatusExpired && l.Status != lease.StatusReclaimed) {
				continue
			}
			if a.At.After(l.StatusAt.Add(lateSlack).Time()) {
				bad = append(bad, fmt.Sprintf("task %s: epoch %d's write (key %s) arrived at %s, after the cluster had %s the lease at %s",
					a.Task, a.Epoch, a.Key, stamp(a.At), l.Status, stamp(l.StatusAt.Time())))
			}
		}
	}
	return bad
}
