package raftstore

import (
	"testing"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/stretchr/testify/require"
)

const lProgress = 30 * time.Second

// newStallModel is a lessorModel whose every task has a progress timeout
// of lProgress and reports progress with its heartbeat (lTTL/3).
func newStallModel(t *testing.T) *lessorModel {
	lm := newLessorModel(t)
	lm.l.stallOf = func(string) stallLimits { return stallLimits{timeout: lProgress, report: lTTL / 3} }
	return lm
}

// keepAlive heartbeats s1 for d in steps shorter than the TTL, ticking.
func (lm *lessorModel) keepAlive(session string, d time.Duration, mark func()) []lease.Op {
	var ops []lease.Op
	for step := lTTL / 2; d > 0; d -= step {
		lm.clock.Advance(min(step, d))
		lm.heartbeat(session)
		if mark != nil {
			mark()
		}
		ops = append(ops, lm.tick()...)
	}
	return ops
}

func TestLessorStalledLeaseGoesTheWholeWay(t *testing.T) {
	lm := newStallModel(t)
	lm.l.promote(nil, nil)
	g := lm.grant("a", "s1")
	require.Empty(t, lm.keepAlive("s1", lProgress, nil), "heartbeats alone keep it until the progress deadline")
	lm.clock.Advance(time.Millisecond)
	lm.heartbeat("s1")
	require.Equal(t, []lease.Op{lease.OpSuspect}, lm.tick())
	tk, _ := lm.m.Task("a")
	require.Equal(t, lease.ReasonStalled, tk.Lease.Reason)
	require.False(t, lm.l.stallCleared(*tk.Lease, lm.l.stallOf("")), "a heartbeat is not progress")

	// Heartbeats go on: they do not save it; the grace plus one report
	// interval later it expires, and the resume guard reclaims it.
	require.Empty(t, lm.keepAlive("s1", lGrace+lTTL/3, nil))
	lm.clock.Advance(time.Millisecond)
	require.Equal(t, []lease.Op{lease.OpExpire}, lm.tick())
	require.Equal(t, []lease.Op{lease.OpReclaim}, lm.tick())
	tk, _ = lm.m.Task("a")
	require.Equal(t, lease.StatusReclaimed, tk.Lease.Status)
	require.Equal(t, lease.ReasonStalled, tk.Lease.Reason)
	require.Equal(t, g.Epoch, tk.Lease.Epoch)
}

// A worker that shows progress within the timeout never loses its lease,
// however long it runs.
func TestLessorProgressInTimeKeepsTheLease(t *testing.T) {
	lm := newStallModel(t)
	lm.l.promote(nil, nil)
	g := lm.grant("a", "s1")
	k := leaseKey{"a", g.Epoch}
	last := lm.clock.Now()
	ops := lm.keepAlive("s1", 10*lProgress, func() {
		// A mark every progress timeout minus a second, reported with the
		// heartbeat after it.
		if lm.clock.Now().Sub(last) >= lProgress-time.Second {
			last = lm.clock.Now()
			lm.l.progressed(k, last)
		}
	})
	require.Empty(t, ops)
	require.Equal(t, lease.StatusActive, lm.status("a"))
}

// A mark made just before the deadline but carried by a heartbeat that
// arrives after the suspicion still counts: it clears the stall.
func TestLessorLateReportedMarkClearsTheStall(t *testing.T) {
	lm := newStallModel(t)
	lm.l.promote(nil, nil)
	g := lm.grant("a", "s1")
	lm.keepAlive("s1", lProgress, nil)
	mark := lm.clock.Now().Add(-time.Second) // made in time
	lm.clock.Advance(time.Millisecond)
	require.Equal(t, []lease.Op{lease.OpSuspect}, lm.tick())
	lm.l.progressed(leaseKey{"a", g.Epoch}, mark)
	tk, _ := lm.m.Task("a")
	require.True(t, lm.l.stallCleared(*tk.Lease, lm.l.stallOf("")))
}

// A new leader knows no progress the old one saw: it counts from its own
// promotion, so it cannot reclaim a worker that progressed in time.
func TestLessorNewLeaderRestartsTheProgressClock(t *testing.T) {
	lm := newStallModel(t)
	lm.l.promote(nil, nil)
	lm.grant("a", "s1")
	lm.keepAlive("s1", lProgress-time.Second, nil)
	// The old leader saw a mark a moment ago; it never reached the log.
	lm.l.demote()
	lm.l.promote(lm.m.LiveLeases(), []string{"s1"})
	require.Empty(t, lm.keepAlive("s1", lProgress, nil), "the new leader allows a whole timeout from its promotion")
	lm.clock.Advance(time.Millisecond)
	require.Equal(t, []lease.Op{lease.OpSuspect}, lm.tick(), "and then finds the stall")
}

// A task without a progress timeout (or a waiting one, which has no live
// lease) is never reclaimed as stalled.
func TestLessorNoProgressTimeoutNoStall(t *testing.T) {
	lm := newLessorModel(t)
	lm.l.promote(nil, nil)
	lm.grant("a", "s1")
	require.Empty(t, lm.keepAlive("s1", 10*lProgress, nil))
}

// Through the real store: heartbeats without progress lose the lease to a
// stalled reclaim; heartbeats carrying marks keep it; lease ends are
// counted by reason.
func TestStoreReclaimsStalledLease(t *testing.T) {
	const progress = 1500 * time.Millisecond
	c := newTestCluster(t, 1, func(cfg *Config) {
		cfg.Profiles["stall"] = Profile{TTL: testTTL, Heartbeat: testHeartbeat, ProgressTimeout: progress}
	})
	s := c.waitForLeader()
	ctx := ctxT(t)
	sid := openSession(t, s, "w1")
	stuck, err := s.Acquire(ctx, "a1", "stuck", api.AcquireRequest{SessionID: sid, Create: true, Profile: "stall"})
	require.NoError(t, err)
	busy, err := s.Acquire(ctx, "a2", "busy", api.AcquireRequest{SessionID: sid, Create: true, Profile: "stall"})
	require.NoError(t, err)

	status := func(id string) *lease.Lease {
		tk, err := s.Task(ctx, id, false)
		require.NoError(t, err)
		return tk.Lease
	}
	start := time.Now()
	var sawStalled bool
	waitFor(t, waitTimeout, "stuck reclaimed as stalled", func() bool {
		_, err := s.Heartbeat(ctx, sid, api.HeartbeatRequest{Leases: []api.HeldLease{
			{TaskID: "stuck", Epoch: stuck.Lease.Epoch},
			{TaskID: "busy", Epoch: busy.Lease.Epoch, SinceProgressMs: 1},
		}})
		require.NoError(t, err)
		if l := status("stuck"); l.Status == lease.StatusSuspectDead {
			sawStalled = sawStalled || l.Reason == lease.ReasonStalled
		}
		time.Sleep(testHeartbeat / 3)
		return status("stuck").Status == lease.StatusReclaimed
	})
	require.GreaterOrEqual(t, time.Since(start), progress, "not before the progress timeout")
	require.True(t, sawStalled, "the suspicion names the stall")
	l := status("stuck")
	require.Equal(t, lease.ReasonStalled, l.Reason)
	b := status("busy")
	require.Equal(t, lease.StatusActive, b.Status, "progress marks keep a lease")
	require.False(t, b.ProgressAt.IsZero(), "the leader shows the last progress")
	require.Equal(t, 1.0, metricValue(t, s.m.stalledReclaims))
	require.Equal(t, 1.0, metricValue(t, s.m.leaseEnds.WithLabelValues(lease.ReasonStalled)))

	// A give-back for the worker's exit is counted under its own reason.
	_, err = s.Release(ctx, "r1", "busy", api.ReleaseRequest{SessionID: sid, Epoch: busy.Lease.Epoch,
		Outcome: lease.OutcomeGivenBack, Reason: lease.ReasonWorkerExited})
	require.NoError(t, err)
	require.Equal(t, 1.0, metricValue(t, s.m.leaseEnds.WithLabelValues(lease.ReasonWorkerExited)))
	require.Equal(t, lease.ReasonWorkerExited, status("busy").Reason)
}

func TestHeartbeatRefusesAHugeSinceProgress(t *testing.T) {
	c := newTestCluster(t, 1)
	s := c.waitForLeader()
	sid := openSession(t, s, "w1")
	_, err := s.Heartbeat(ctxT(t), sid, api.HeartbeatRequest{Leases: []api.HeldLease{{TaskID: "x", Epoch: 1, SinceProgressMs: api.MaxSinceProgressMs + 1}}})
	require.ErrorIs(t, err, ErrInvalidArgument)
}
