package leases

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/proxytest"
)

func testGrant(task string, epoch uint64, validFor, hb time.Duration) api.Grant {
	return api.Grant{
		Lease:       lease.Lease{TaskID: task, Epoch: epoch, Status: lease.StatusActive},
		Task:        lease.Task{ID: task},
		ValidForMs:  validFor.Milliseconds(),
		HeartbeatMs: hb.Milliseconds(),
	}
}

func TestMargin(t *testing.T) {
	require.Equal(t, 200*time.Millisecond, margin(10*time.Second, 0.01, 200*time.Millisecond))
	require.Equal(t, 600*time.Millisecond, margin(60*time.Second, 0.01, 200*time.Millisecond))
	require.Equal(t, 2*time.Second, margin(20*time.Second, 0.1, 0))
}

func TestDeadlineCountsFromSendTime(t *testing.T) {
	clk := proxytest.NewClock()
	lt := newLeaseTable(0.01, 200*time.Millisecond)
	sent := clk.Now()
	clk.Advance(3 * time.Second) // the acquire took 3s to come back
	lt.grant(testGrant("t", 7, 10*time.Second, 3*time.Second), sent, clk.Now())

	// Deadline = send + 10s - max(200ms, 100ms) = send + 9.8s.
	_, why := lt.current("t", sent.Add(9800*time.Millisecond-time.Nanosecond))
	require.Empty(t, why)
	_, why = lt.current("t", sent.Add(9800*time.Millisecond))
	require.Equal(t, ReasonExpired, why, "blocked exactly at the deadline, never later")

	// A renewal sent at +5s extends to +14.8s, measured from its send.
	kind, cut, _ := lt.renew(api.LeaseState{TaskID: "t", Epoch: 7, Status: lease.StatusActive, ValidForMs: 10000}, sent.Add(5*time.Second), sent.Add(6*time.Second))
	require.Empty(t, kind)
	require.Zero(t, cut)
	_, why = lt.current("t", sent.Add(14799*time.Millisecond))
	require.Empty(t, why)
	_, why = lt.current("t", sent.Add(14800*time.Millisecond))
	require.Equal(t, ReasonExpired, why)

	// An older reply can never shorten the deadline.
	lt.renew(api.LeaseState{TaskID: "t", Epoch: 7, Status: lease.StatusActive, ValidForMs: 1000}, sent.Add(5*time.Second), sent.Add(6*time.Second))
	_, why = lt.current("t", sent.Add(14799*time.Millisecond))
	require.Empty(t, why)
}

func TestValidityShorterThanMarginIsNeverCurrent(t *testing.T) {
	clk := proxytest.NewClock()
	lt := newLeaseTable(0.01, 200*time.Millisecond)
	lt.grant(testGrant("t", 1, 150*time.Millisecond, time.Second), clk.Now(), clk.Now())
	_, why := lt.current("t", clk.Now())
	require.Equal(t, ReasonExpired, why)
}

func TestSignalsTakeEffectAtOnce(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		sig    string
		status lease.Status
		kind   EventKind
		why    Reason
	}{
		{api.SignalRevoked, lease.StatusRevoked, EventRevoked, ReasonRevoked},
		{api.SignalLost, lease.StatusExpired, EventLost, ReasonExpired},
		{api.SignalLost, lease.StatusReclaimed, EventLost, ReasonExpired},
		{api.SignalWaiting, lease.StatusPausedWaiting, EventLost, ReasonWaiting},
		{"", lease.StatusSuspectDead, EventLost, ReasonSuspect},
	} {
		lt := newLeaseTable(0.01, 200*time.Millisecond)
		ref, _ := lt.grant(testGrant("t", 5, 10*time.Second, 3*time.Second), now, now)
		kind, _, epoch := lt.renew(api.LeaseState{TaskID: "t", Epoch: 5, Status: tc.status, Signal: tc.sig}, now, now)
		require.Equal(t, tc.kind, kind, tc.sig)
		require.Equal(t, tc.why, ref.Ticket.MayWrite(now), "a request decided before the signal is refused too: %s", tc.sig)
		require.Equal(t, uint64(5), epoch)
		_, why := lt.current("t", now)
		require.Equal(t, tc.why, why, tc.sig)
	}
}

func TestSupersededEpochIsLost(t *testing.T) {
	now := time.Now()
	lt := newLeaseTable(0.01, 200*time.Millisecond)
	lt.grant(testGrant("t", 5, 10*time.Second, 3*time.Second), now, now)
	kind, _, _ := lt.renew(api.LeaseState{TaskID: "t", Epoch: 6, Status: lease.StatusActive, ValidForMs: 10000}, now, now)
	require.Equal(t, EventLost, kind)
	_, why := lt.current("t", now)
	require.Equal(t, ReasonLost, why)
}

func TestRevivedAfterLocalExpiry(t *testing.T) {
	clk := proxytest.NewClock()
	lt := newLeaseTable(0.01, 200*time.Millisecond)
	t0 := clk.Now()
	before, _ := lt.grant(testGrant("t", 5, 2*time.Second, time.Second), t0, t0)
	clk.Advance(2 * time.Second)
	expired := lt.lapseDue(clk.Now())
	require.Len(t, expired, 1)
	_, why := lt.current("t", clk.Now())
	require.Equal(t, ReasonExpired, why)
	// A late heartbeat, sent now, renews: same epoch, nobody else let in.
	kind, _, _ := lt.renew(api.LeaseState{TaskID: "t", Epoch: 5, Status: lease.StatusActive, Signal: api.SignalRevived, ValidForMs: 2000}, clk.Now(), clk.Now())
	require.Equal(t, EventRevived, kind)
	snap, why := lt.current("t", clk.Now())
	require.Empty(t, why)
	require.NotEqual(t, before.Ticket.gen, snap.Ticket.gen, "a revived lease gets a fresh generation")
	require.Equal(t, ReasonExpired, before.Ticket.MayWrite(clk.Now()), "the lapsed generation never writes again")
}

func TestOrdinalRestartsAtCheckpoint(t *testing.T) {
	now := time.Now()
	lt := newLeaseTable(0.01, 0)
	g := testGrant("t", 5, 10*time.Second, 3*time.Second)
	g.Task.Checkpoint = &lease.Checkpoint{Seq: 4}
	lt.grant(g, now, now)
	seq, n, ok := lt.nextWrite("t", 5)
	require.True(t, ok)
	require.Equal(t, []uint64{4, 1}, []uint64{seq, n})
	_, n, _ = lt.nextWrite("t", 5)
	require.Equal(t, uint64(2), n)
	lt.checkpointed("t", 5, 5, "step")
	seq, n, _ = lt.nextWrite("t", 5)
	require.Equal(t, []uint64{5, 1}, []uint64{seq, n})
	_, _, ok = lt.nextWrite("t", 4)
	require.False(t, ok, "a stale epoch gets no key")
}

func TestRegrantOfSameEpochKeepsGeneration(t *testing.T) {
	now := time.Now()
	lt := newLeaseTable(0.01, 0)
	a, _ := lt.grant(testGrant("t", 5, 10*time.Second, 3*time.Second), now, now)
	lt.nextWrite("t", 5)
	b, _ := lt.grant(testGrant("t", 5, 10*time.Second, 3*time.Second), now.Add(time.Second), now.Add(time.Second))
	require.Equal(t, a.Ticket, b.Ticket)
	require.Empty(t, a.Ticket.MayWrite(now))
	_, n, _ := lt.nextWrite("t", 5)
	require.Equal(t, uint64(2), n, "the ordinal survives a retried acquire")
	c, _ := lt.grant(testGrant("t", 6, 10*time.Second, 3*time.Second), now, now)
	require.NotSame(t, a.Ticket.st, c.Ticket.st)
	require.Equal(t, ReasonLost, a.Ticket.MayWrite(now), "a newer epoch cuts the old one's connections")
}

func renewal(task string, epoch uint64, validMs int64) api.LeaseState {
	return api.LeaseState{TaskID: task, Epoch: epoch, Status: lease.StatusActive, ValidForMs: validMs}
}

func TestHoldBlocksWritesWhileReleasing(t *testing.T) {
	now := time.Now()
	lt := newLeaseTable(0.01, 0)
	snap, _ := lt.grant(testGrant("t", 5, 10*time.Second, 3*time.Second), now, now)
	_, ok := lt.hold("t", 5, ReasonReleased)
	require.True(t, ok)
	require.Equal(t, ReasonReleased, snap.Ticket.MayWrite(now))
	_, why := lt.current("t", now)
	require.Equal(t, ReasonReleased, why)
	// A heartbeat reply meanwhile does not unblock it.
	kind, _, _ := lt.renew(renewal("t", 5, 10000), now, now)
	require.Empty(t, kind)
	_, why = lt.current("t", now)
	require.Equal(t, ReasonReleased, why)
	// The release failed: current again, with a fresh generation.
	lt.unhold("t", 5, now)
	s2, why := lt.current("t", now)
	require.Empty(t, why)
	require.NotEqual(t, snap.Ticket.gen, s2.Ticket.gen)
	require.Equal(t, ReasonExpired, snap.Ticket.MayWrite(now), "the held generation stays cut")
}

func TestRenewMovesTheDeadline(t *testing.T) {
	clk := proxytest.NewClock()
	lt := newLeaseTable(0.01, 200*time.Millisecond)
	t0 := clk.Now()
	ref, _ := lt.grant(testGrant("t", 5, 2*time.Second, time.Second), t0, t0)
	require.Equal(t, ReasonExpired, ref.Ticket.MayWrite(t0.Add(1800*time.Millisecond)))
	lt.renew(renewal("t", 5, 2000), t0.Add(time.Second), t0.Add(time.Second))
	require.Empty(t, ref.Ticket.MayWrite(t0.Add(2700*time.Millisecond)))
	require.Equal(t, ReasonExpired, ref.Ticket.MayWrite(t0.Add(2800*time.Millisecond)))
}

// TestOwnWaitIsNotALoss: a heartbeat reply that reports the worker's own
// wait before the wait call returns is no loss (no lost event, no drop);
// a waiting signal for a lease the worker is not parking is.
func TestOwnWaitIsNotALoss(t *testing.T) {
	now := time.Now()
	lt := newLeaseTable(0.01, 0)
	lt.grant(testGrant("t", 5, 10*time.Second, 3*time.Second), now, now)
	_, ok := lt.hold("t", 5, ReasonWaiting)
	require.True(t, ok)
	kind, _, _ := lt.renew(api.LeaseState{TaskID: "t", Epoch: 5, Signal: api.SignalWaiting, Status: lease.StatusPausedWaiting}, now, now)
	require.Empty(t, kind, "the worker's own wait was reported as a loss")
	_, why := lt.current("t", now)
	require.Equal(t, ReasonWaiting, why, "still held, blocked, until the wait call drops it")

	lt.grant(testGrant("u", 6, 10*time.Second, 3*time.Second), now, now)
	kind, _, _ = lt.renew(api.LeaseState{TaskID: "u", Epoch: 6, Signal: api.SignalWaiting, Status: lease.StatusPausedWaiting}, now, now)
	require.Equal(t, EventLost, kind)
}
