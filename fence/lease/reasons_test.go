package lease

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestEndReasonIsBounded(t *testing.T) {
	known := map[string]bool{}
	for _, r := range EndReasons() {
		known[r] = true
	}
	cases := []struct {
		st     Status
		out    Outcome
		reason string
		want   string
	}{
		{StatusReleased, OutcomeCompleted, "", "completed"},
		{StatusReleased, OutcomeFailed, "boom", "failed"},
		{StatusReleased, OutcomeGivenBack, ReasonWorkerExited, ReasonWorkerExited},
		{StatusReleased, OutcomeGivenBack, ReasonWorkerUnhealthy, ReasonWorkerUnhealthy},
		{StatusReleased, OutcomeGivenBack, "any free text", "given_back"},
		{StatusReleased, "", sessionClosedReason, "session_closed"},
		{StatusReclaimed, "", ReasonStalled, ReasonStalled},
		{StatusReclaimed, "", "resume guard passed", "expired"},
		{StatusPausedWaiting, "", "", "waiting"},
		{StatusRevoked, "", "operator", "revoked"},
	}
	for _, c := range cases {
		got := EndReason(c.st, c.out, c.reason)
		require.Equal(t, c.want, got, "%+v", c)
		require.True(t, known[got], "%q is not in EndReasons", got)
	}
}

// A stalled suspicion is kept on the lease, survives expiry and names the
// reclaim; a revive (the holder showed progress) clears it. Other
// suspicions leave the reason as it was.
func TestStalledReasonRunsThroughReclaim(t *testing.T) {
	m := New()
	t0 := time.Unix(1000, 0)
	apply := func(i uint64, c Command) Result {
		c.Time = t0.Add(time.Duration(i) * time.Second)
		return m.Apply(i, &c)
	}
	require.NoError(t, apply(1, Command{Op: OpOpenSession, SessionID: "s", WorkerID: "w"}).Err)
	g := apply(2, Command{Op: OpAcquire, SessionID: "s", TaskID: "t", Create: true, TTL: time.Minute})
	require.NoError(t, g.Err)
	ep := g.Lease.Epoch

	r := apply(3, Command{Op: OpSuspect, TaskID: "t", Epoch: ep, Reason: "heartbeat overdue"})
	require.NoError(t, r.Err)
	require.Empty(t, r.Lease.Reason, "an ordinary suspicion keeps the record unchanged")
	require.NoError(t, apply(4, Command{Op: OpRevive, TaskID: "t", Epoch: ep, SessionID: "s"}).Err)

	r = apply(5, Command{Op: OpSuspect, TaskID: "t", Epoch: ep, Reason: ReasonStalled})
	require.Equal(t, ReasonStalled, r.Lease.Reason)
	r = apply(6, Command{Op: OpRevive, TaskID: "t", Epoch: ep, SessionID: "s"})
	require.Empty(t, r.Lease.Reason, "progress clears the stall")

	require.NoError(t, apply(7, Command{Op: OpSuspect, TaskID: "t", Epoch: ep, Reason: ReasonStalled}).Err)
	r = apply(8, Command{Op: OpExpire, TaskID: "t", Epoch: ep})
	require.Equal(t, ReasonStalled, r.Lease.Reason)
	r = apply(9, Command{Op: OpReclaim, TaskID: "t", Epoch: ep})
	require.NoError(t, r.Err)
	require.Equal(t, StatusReclaimed, r.Lease.Status)
	require.Equal(t, ReasonStalled, r.Lease.Reason)
	require.Equal(t, ReasonStalled, EndReason(r.Lease.Status, "", r.Lease.Reason))
}
