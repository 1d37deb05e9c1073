package lease

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// grantActive opens sid (if needed), creates tid and acquires it; it returns
// the lease epoch.
func (h *harness) grantActive(sid, tid string) uint64 {
	h.t.Helper()
	h.ok(openS(sid))
	if _, ok := h.m.Task(tid); !ok {
		h.ok(createT(tid, 0))
	}
	res := h.ok(acquireT(sid, tid))
	require.Equal(h.t, StatusActive, res.Lease.Status)
	return res.Lease.Epoch
}

// expireLease drives tid's lease through suspect_dead and expired.
func (h *harness) expireLease(tid string, epoch uint64) {
	h.t.Helper()
	h.ok(leaderOp(OpSuspect, tid, epoch))
	h.ok(leaderOp(OpExpire, tid, epoch))
}

func TestOpenSession(t *testing.T) {
	h := newHarness(t)
	h.noop(Command{Op: OpOpenSession, SessionID: "s1"}, ErrInvalid)
	h.noop(Command{Op: OpOpenSession, WorkerID: "w"}, ErrInvalid)

	h.ok(openS("s1"))
	s, ok := h.m.Session("s1")
	require.True(t, ok)
	require.Equal(t, Session{ID: "s1", WorkerID: "w-s1", CreatedAt: StampOf(t0)}, *s)

	// Re-opening with the same worker is idempotent (a retried open).
	h.advance(time.Second)
	before := stateHash(t, h.m)
	h.ok(openS("s1"))
	require.Equal(t, before, stateHash(t, h.m))
	s, _ = h.m.Session("s1")
	require.Equal(t, StampOf(t0), s.CreatedAt, "a re-open must not reset the session")

	// The same id from another worker is refused.
	h.noop(Command{Op: OpOpenSession, SessionID: "s1", WorkerID: "other"}, ErrInvalid)
	require.Len(t, h.m.Sessions(), 1)
}

func TestCloseSession(t *testing.T) {
	h := newHarness(t)
	h.noop(closeS("nope"), ErrSessionNotFound)

	ea := h.grantActive("s1", "a")
	eb := h.grantActive("s1", "b")
	ec := h.grantActive("s1", "c")
	h.grantActive("s2", "other")
	h.ok(leaderOp(OpSuspect, "b", eb))
	h.expireLease("c", ec)

	h.advance(time.Second)
	res := h.ok(closeS("s1"))
	require.Len(t, res.Released, 1, "only the active lease is given back")
	require.Equal(t, "a", res.Released[0].TaskID)
	require.Equal(t, ea, res.Released[0].Epoch)
	require.Equal(t, StatusReleased, res.Released[0].Status)

	_, ok := h.m.Session("s1")
	require.False(t, ok)
	a := h.task("a")
	require.Equal(t, TaskPending, a.State)
	require.Equal(t, StatusReleased, a.Lease.Status)
	require.Equal(t, StampOf(h.now), a.ClaimableAt)

	// The suspect and expired leases keep going through reclaim; the
	// suspect one is expired, since no heartbeat of s1 can come any more.
	require.Equal(t, StatusExpired, h.task("b").Lease.Status)
	require.Equal(t, "session closed while suspect", h.task("b").Lease.Reason)
	require.Equal(t, StatusExpired, h.task("c").Lease.Status)
	require.Equal(t, []string{"b", "c"}, leaseTasks(h.m.SessionLeases("s1")))
	require.Equal(t, []string{"b", "c", "other"}, leaseTasks(h.m.LiveLeases()))

	// A closed session can do nothing more.
	h.noop(acquireT("s1", "a"), ErrSessionNotFound)
	h.noop(claimS("s1"), ErrSessionNotFound)
	h.noop(closeS("s1"), ErrSessionNotFound)

	// A session opened again under the same id, by another worker, cannot
	// revive the old one's lease and so hold its epoch (I2).
	h.ok(Command{Op: OpOpenSession, SessionID: "s1", WorkerID: "someone-else"})
	h.noop(Command{Op: OpRevive, TaskID: "b", Epoch: eb, SessionID: "s1"}, ErrLeaseNotActive)
	require.Equal(t, StatusExpired, h.task("b").Lease.Status)
	h.ok(closeS("s1"))

	// The given-back task is claimable at once; b finishes reclaim.
	h.ok(openS("s3"))
	res = h.ok(claimS("s3"))
	require.Equal(t, "a", res.Task.ID)
	require.Greater(t, res.Lease.Epoch, ea)
	h.ok(leaderOp(OpReclaim, "b", eb))
	h.ok(leaderOp(OpReclaim, "c", ec))
	require.Empty(t, h.m.SessionLeases("s1"))
	require.Equal(t, []string{"a", "other"}, leaseTasks(h.m.LiveLeases()))
}

func leaseTasks(ls []Lease) []string {
	out := []string{}
	for _, l := range ls {
		out = append(out, l.TaskID)
	}
	return out
}

func TestCreateTask(t *testing.T) {
	h := newHarness(t)
	h.noop(Command{Op: OpCreateTask, TTL: ttl}, ErrInvalid)
	h.noop(Command{Op: OpCreateTask, TaskID: "a"}, ErrInvalid)
	h.noop(Command{Op: OpCreateTask, TaskID: "a", TTL: -time.Second}, ErrInvalid)

	c := createT("a", 7)
	c.Payload = []byte("p")
	res := h.ok(c)
	require.Equal(t, "a", res.Task.ID)
	require.Equal(t, TaskPending, res.Task.State)
	require.Equal(t, 7, res.Task.Priority)
	require.Equal(t, ttl, res.Task.TTL)
	require.Equal(t, []byte("p"), res.Task.Payload)
	require.Equal(t, StampOf(t0), res.Task.CreatedAt)
	require.Equal(t, StampOf(t0), res.Task.ClaimableAt)
	require.Zero(t, res.Task.MaxEpoch)
	require.Nil(t, res.Task.Lease)

	h.advance(time.Second)
	res = h.noop(createT("a", 1), ErrTaskExists)
	require.Equal(t, 7, res.Task.Priority, "the existing task is returned")
	h.noop(Command{Op: 99, TaskID: "a"}, ErrInvalid)
}

func TestAcquire(t *testing.T) {
	t.Run("new", func(t *testing.T) {
		h := newHarness(t)
		h.ok(openS("s1"))
		h.ok(createT("a", 0))
		h.advance(time.Second)
		res := h.ok(acquireT("s1", "a"))
		l := res.Lease
		require.Equal(t, h.idx, l.Epoch, "the epoch is the raft index of the grant")
		require.Equal(t, fmt.Sprintf("lease-%d", h.idx), l.ID())
		require.Equal(t, Lease{
			TaskID: "a", WorkerID: "w-s1", SessionID: "s1", Epoch: h.idx,
			AcquiredAt: StampOf(h.now), ExpiresAt: StampOf(h.now.Add(ttl)), HeartbeatAt: StampOf(h.now), TTL: ttl,
			Status: StatusActive, StatusAt: StampOf(h.now),
		}, *l)
		tk := h.task("a")
		require.Equal(t, TaskLeased, tk.State)
		require.Equal(t, uint64(1), tk.Attempts)
		require.Equal(t, l.Epoch, tk.MaxEpoch)
		require.Equal(t, *l, *tk.Lease)
		require.Equal(t, []Lease{*l}, h.m.SessionLeases("s1"))

		// A lease id given by the proposer is kept.
		h.ok(createT("b", 0))
		c := acquireT("s1", "b")
		c.LeaseID = "L-b"
		require.Equal(t, "L-b", h.ok(c).Lease.ID())
	})

	t.Run("idempotent re-acquire by the holder", func(t *testing.T) {
		h := newHarness(t)
		e := h.grantActive("s1", "a")
		h.advance(time.Second)
		before := stateHash(t, h.m)
		res := h.ok(acquireT("s1", "a"))
		require.Equal(t, e, res.Lease.Epoch)
		require.Equal(t, before, stateHash(t, h.m), "a re-acquire must not change anything")
		require.Equal(t, uint64(1), h.task("a").Attempts)
	})

	t.Run("errors", func(t *testing.T) {
		type setup func(h *harness)
		held := func(h *harness) { h.grantActive("s2", "a") }
		waiting := func(h *harness) {
			e := h.grantActive("s2", "a")
			h.ok(waitT("s2", "a", e, time.Time{}))
		}
		released := func(o Outcome) setup {
			return func(h *harness) {
				e := h.grantActive("s2", "a")
				h.ok(releaseT("s2", "a", e, o))
			}
		}
		suspect := func(h *harness) {
			e := h.grantActive("s2", "a")
			h.ok(leaderOp(OpSuspect, "a", e))
		}
		expired := func(h *harness) {
			e := h.grantActive("s2", "a")
			h.expireLease("a", e)
		}
		ownSuspect := func(h *harness) {
			e := h.grantActive("s1", "a")
			h.ok(leaderOp(OpSuspect, "a", e))
		}
		for _, tc := range []struct {
			name  string
			setup setup
			cmd   Command
			want  error
		}{
			{"unknown session", func(h *harness) { h.ok(createT("a", 0)) }, acquireT("ghost", "a"), ErrSessionNotFound},
			{"unknown task", func(*harness) {}, acquireT("s1", "a"), ErrTaskNotFound},
			{"create without ttl", func(*harness) {}, Command{Op: OpAcquire, SessionID: "s1", TaskID: "a", Create: true}, ErrTaskNotFound},
			{"held by another", held, acquireT("s1", "a"), ErrLeaseHeld},
			{"waiting", waiting, acquireT("s1", "a"), ErrTaskWaiting},
			{"completed", released(OutcomeCompleted), acquireT("s1", "a"), ErrTaskFinal},
			{"failed", released(OutcomeFailed), acquireT("s1", "a"), ErrTaskFinal},
			{"cancelled", func(h *harness) { h.ok(createT("a", 0)); h.ok(cancelT("a")) }, acquireT("s1", "a"), ErrTaskFinal},
			{"suspect_dead", suspect, acquireT("s1", "a"), ErrNotClaimable},
			{"own suspect_dead", ownSuspect, acquireT("s1", "a"), ErrNotClaimable},
			{"expired", expired, acquireT("s1", "a"), ErrNotClaimable},
			{"final, with create", released(OutcomeCompleted), Command{Op: OpAcquire, SessionID: "s1", TaskID: "a", Create: true, TTL: ttl}, ErrTaskFinal},
		} {
			t.Run(tc.name, func(t *testing.T) {
				h := newHarness(t)
				h.ok(openS("s1"))
				h.ok(openS("s2"))
				tc.setup(h)
				h.advance(time.Second)
				h.noop(tc.cmd, tc.want)
			})
		}
	})

	t.Run("create on acquire", func(t *testing.T) {
		h := newHarness(t)
		h.ok(openS("s1"))
		// An unknown session must not create the task.
		h.noop(Command{Op: OpAcquire, SessionID: "ghost", TaskID: "a", Create: true, TTL: ttl}, ErrSessionNotFound)
		_, ok := h.m.Task("a")
		require.False(t, ok)

		res := h.ok(Command{Op: OpAcquire, SessionID: "s1", TaskID: "a", Create: true, TTL: ttl, Priority: 3, Profile: "p"})
		require.Equal(t, TaskLeased, res.Task.State)
		require.Equal(t, 3, res.Task.Priority)
		require.Equal(t, h.idx, res.Lease.Epoch)
		require.Equal(t, ttl, res.Lease.TTL)
		h.ok(openS("s2"))
		h.noop(claimS("s2"), ErrNoTask) // not left in the claim queue

		// Create on an existing task just acquires it, with its own TTL.
		h.ok(createT("b", 0))
		res = h.ok(Command{Op: OpAcquire, SessionID: "s2", TaskID: "b", Create: true, TTL: time.Hour})
		require.Equal(t, ttl, res.Lease.TTL)
	})
}

func TestClaimOrder(t *testing.T) {
	h := newHarness(t)
	h.ok(openS("w"))
	h.ok(openS("x"))
	h.noop(claimS("ghost"), ErrSessionNotFound)
	h.noop(claimS("w"), ErrNoTask)

	// Created in this order, one second apart.
	h.ok(createT("low-old", 0))
	h.advance(time.Second)
	h.ok(createT("high-new", 5))
	h.advance(time.Second)
	h.ok(createT("b-same", 1))
	h.ok(createT("a-same", 1)) // same priority and age as b-same: id decides
	h.advance(time.Second)
	h.ok(createT("low-new", 0))
	h.advance(time.Second)

	// rec: leased long ago, reclaimed now: its claimable age starts now.
	h.ok(createT("rec", 0))
	erec := h.ok(acquireT("x", "rec")).Lease.Epoch
	// sig: leased, waits, signalled now.
	h.ok(createT("sig", 0))
	esig := h.ok(acquireT("x", "sig")).Lease.Epoch
	h.ok(waitT("x", "sig", esig, time.Time{}))
	// given: leased and given back.
	h.ok(createT("given", 9))
	egiven := h.ok(acquireT("x", "given")).Lease.Epoch
	h.advance(time.Second)
	h.expireLease("rec", erec)
	h.ok(leaderOp(OpReclaim, "rec", erec))
	h.advance(time.Second)
	h.ok(signalT("sig", esig))
	h.advance(time.Second)
	h.ok(releaseT("x", "given", egiven, OutcomeGivenBack))

	want := []string{"given", "high-new", "a-same", "b-same", "low-old", "low-new", "rec", "sig"}
	var got []string
	prev := uint64(0)
	for range want {
		h.advance(time.Millisecond)
		res := h.ok(claimS("w"))
		got = append(got, res.Task.ID)
		require.Greater(t, res.Lease.Epoch, prev)
		prev = res.Lease.Epoch
		require.Equal(t, "w", res.Lease.SessionID)
		require.Equal(t, TaskLeased, res.Task.State)
	}
	require.Equal(t, want, got)
	h.noop(claimS("w"), ErrNoTask)
	require.Len(t, h.m.SessionLeases("w"), len(want))
	require.Greater(t, h.task("rec").MaxEpoch, erec)
	require.Greater(t, h.task("sig").MaxEpoch, esig)
	require.Greater(t, h.task("given").MaxEpoch, egiven)
}

func TestClaimSkipsUnclaimable(t *testing.T) {
	h := newHarness(t)
	h.ok(openS("w"))
	h.ok(createT("acq", 9))
	h.ok(acquireT("w", "acq")) // acquired by name: out of the queue
	h.ok(createT("canc", 9))
	h.ok(cancelT("canc"))
	h.ok(createT("wait", 9))
	e := h.ok(acquireT("w", "wait")).Lease.Epoch
	h.ok(waitT("w", "wait", e, time.Time{}))
	h.ok(createT("done", 9))
	e = h.ok(acquireT("w", "done")).Lease.Epoch
	h.ok(releaseT("w", "done", e, OutcomeCompleted))
	h.ok(createT("susp", 9))
	e = h.ok(acquireT("w", "susp")).Lease.Epoch
	h.expireLease("susp", e)
	h.ok(createT("plain", 0))
	require.Equal(t, "plain", h.ok(claimS("w")).Task.ID)
	h.noop(claimS("w"), ErrNoTask)
}

func TestCheckpoint(t *testing.T) {
	h := newHarness(t)
	e := h.grantActive("s1", "a")
	h.ok(openS("s2"))
	h.noop(checkpointT("s1", "ghost", e, 1, "x"), ErrTaskNotFound)
	h.noop(checkpointT("s1", "a", e+100, 1, "x"), ErrStaleEpoch)
	h.noop(checkpointT("s1", "a", e-1, 1, "x"), ErrStaleEpoch)
	h.noop(checkpointT("s2", "a", e, 1, "x"), ErrNotHolder)

	h.advance(time.Second)
	res := h.ok(checkpointT("s1", "a", e, 5, "five"))
	require.Equal(t, Checkpoint{Seq: 5, Step: "five", Data: []byte("data-five"), Epoch: e, At: StampOf(h.now)}, *res.Task.Checkpoint)
	require.Equal(t, e, res.Lease.Epoch)
	h.noop(checkpointT("s1", "a", e, 5, "again"), ErrCheckpointSeq)
	h.noop(checkpointT("s1", "a", e, 4, "back"), ErrCheckpointSeq)

	// seq 0 means "the next one".
	res = h.ok(checkpointT("s1", "a", e, 0, "six"))
	require.Equal(t, uint64(6), res.Task.Checkpoint.Seq)
	// The leader may checkpoint on the holder's behalf without a session id.
	c := checkpointT("", "a", e, 9, "nine")
	require.Equal(t, uint64(9), h.ok(c).Task.Checkpoint.Seq)
	require.Equal(t, uint64(9), h.task("a").Checkpoint.Seq)

	// Not active any more: suspect_dead refuses writes.
	h.ok(leaderOp(OpSuspect, "a", e))
	h.noop(checkpointT("s1", "a", e, 0, "late"), ErrLeaseNotActive)
	h.ok(Command{Op: OpRevive, TaskID: "a", Epoch: e, SessionID: "s1"})
	h.ok(checkpointT("s1", "a", e, 0, "ten"))
	h.ok(releaseT("s1", "a", e, OutcomeGivenBack))
	h.noop(checkpointT("s1", "a", e, 0, "after release"), ErrLeaseNotActive)

	// A new owner continues from the handed-over checkpoint; the old epoch
	// is fenced.
	e2 := h.ok(acquireT("s2", "a")).Lease.Epoch
	require.Equal(t, uint64(10), h.task("a").Checkpoint.Seq)
	h.noop(checkpointT("s1", "a", e, 0, "zombie"), ErrStaleEpoch)
	require.Equal(t, uint64(11), h.ok(checkpointT("s2", "a", e2, 0, "eleven")).Task.Checkpoint.Seq)
	require.Equal(t, e2, h.task("a").Checkpoint.Epoch)

	// No lease at all.
	h.ok(createT("fresh", 0))
	h.noop(checkpointT("s1", "fresh", 0, 1, "x"), ErrStaleEpoch)
}

func TestWaitSignal(t *testing.T) {
	h := newHarness(t)
	e := h.grantActive("s1", "a")
	h.ok(openS("s2"))
	deadline := t0.Add(time.Hour)
	h.noop(waitT("s1", "a", e+1, deadline), ErrStaleEpoch)
	h.noop(waitT("s2", "a", e, deadline), ErrNotHolder)
	h.noop(waitT("s1", "ghost", e, deadline), ErrTaskNotFound)
	h.noop(signalT("a", 0), ErrNotWaiting)
	h.noop(signalT("ghost", 0), ErrTaskNotFound)

	h.advance(time.Second)
	res := h.ok(waitT("s1", "a", e, deadline))
	require.Equal(t, StatusPausedWaiting, res.Lease.Status)
	require.Equal(t, TaskWaiting, res.Task.State)
	require.Equal(t, StampOf(deadline), res.Task.WaitDeadline())
	require.Empty(t, h.m.SessionLeases("s1"), "a waiting task occupies no worker")
	require.Empty(t, h.m.LiveLeases())
	h.noop(claimS("s2"), ErrNoTask)
	h.noop(acquireT("s2", "a"), ErrTaskWaiting)
	h.noop(acquireT("s1", "a"), ErrTaskWaiting)
	h.noop(checkpointT("s1", "a", e, 0, "x"), ErrLeaseNotActive)
	h.noop(waitT("s1", "a", e, deadline), ErrLeaseNotActive)
	h.noop(releaseT("s1", "a", e, OutcomeCompleted), ErrLeaseNotActive)

	require.Empty(t, h.m.WaitingDue(deadline.Add(-time.Nanosecond)))
	require.Equal(t, []string{"a"}, h.m.WaitingDue(deadline))

	// A signal carrying another epoch is stale: a no-op.
	h.noop(signalT("a", e+1), ErrStaleEpoch)
	h.noop(signalT("a", e-1), ErrStaleEpoch)

	h.advance(time.Second)
	res = h.ok(signalT("a", e))
	require.Equal(t, TaskPending, res.Task.State)
	require.Equal(t, []byte("approved"), res.Task.Signal())
	require.True(t, res.Task.WaitDeadline().IsZero())
	require.Equal(t, StampOf(h.now), res.Task.ClaimableAt)
	require.Empty(t, h.m.WaitingDue(deadline))
	h.noop(signalT("a", e), ErrNotWaiting)

	res = h.ok(claimS("s2"))
	require.Equal(t, "a", res.Task.ID)
	require.Greater(t, res.Lease.Epoch, e, "the grant after a signal has a new, higher epoch")
	require.Equal(t, []byte("approved"), res.Task.Signal(), "the new owner sees the signal")
	require.Equal(t, []byte("approved"), h.task("a").Signal(), "kept for an owner after a reclaim")
	require.Equal(t, StatusPausedWaiting, res.Task.History()[len(res.Task.History())-1].Status)

	// A stale deadline signal cannot wake a task that waits again.
	e2 := res.Lease.Epoch
	h.ok(waitT("s2", "a", e2, time.Time{}))
	require.Nil(t, h.task("a").Signal(), "a new wait drops the old answer")
	require.Empty(t, h.m.WaitingDue(deadline.Add(time.Hour)), "no deadline: never due")
	h.noop(signalT("a", e), ErrStaleEpoch)
	h.ok(signalT("a", 0)) // an operator signal names no epoch
	require.Equal(t, TaskPending, h.task("a").State)
}

func TestRelease(t *testing.T) {
	for _, from := range []Status{StatusActive, StatusSuspectDead} {
		for _, tc := range []struct {
			outcome Outcome
			state   TaskState
		}{
			{OutcomeCompleted, TaskCompleted},
			{OutcomeFailed, TaskFailed},
			{OutcomeGivenBack, TaskPending},
		} {
			t.Run(fmt.Sprintf("%s from %s", tc.outcome, from), func(t *testing.T) {
				h := newHarness(t)
				e := h.grantActive("s1", "a")
				h.ok(openS("s2"))
				if from == StatusSuspectDead {
					h.ok(leaderOp(OpSuspect, "a", e))
				}
				h.noop(releaseT("s2", "a", e, tc.outcome), ErrNotHolder)
				h.noop(releaseT("s1", "a", e+1, tc.outcome), ErrStaleEpoch)
				h.noop(releaseT("s1", "ghost", e, tc.outcome), ErrTaskNotFound)

				h.advance(time.Second)
				res := h.ok(releaseT("s1", "a", e, tc.outcome))
				require.Equal(t, StatusReleased, res.Lease.Status)
				require.Equal(t, e, res.Lease.Epoch)
				require.Equal(t, StampOf(h.now), res.Lease.StatusAt)
				require.Equal(t, tc.state, res.Task.State)
				require.Empty(t, h.m.SessionLeases("s1"))
				require.Empty(t, h.m.LiveLeases())

				// Double release is rejected and changes nothing.
				h.noop(releaseT("s1", "a", e, tc.outcome), ErrLeaseNotActive)
				h.noop(releaseT("s1", "a", e, OutcomeCompleted), ErrLeaseNotActive)

				switch tc.outcome {
				case OutcomeGivenBack:
					require.Equal(t, StampOf(h.now), res.Task.ClaimableAt)
					r := h.ok(claimS("s2"))
					require.Equal(t, "a", r.Task.ID)
					require.Greater(t, r.Lease.Epoch, e)
				case OutcomeCompleted:
					require.Equal(t, []byte("r"), res.Task.Result())
					h.noop(claimS("s2"), ErrNoTask)
				case OutcomeFailed:
					require.Equal(t, []byte("r"), res.Task.Result())
					require.Equal(t, "why", res.Task.Reason())
					h.noop(claimS("s2"), ErrNoTask)
				}
			})
		}
	}

	t.Run("from expired", func(t *testing.T) {
		h := newHarness(t)
		e := h.grantActive("s1", "a")
		h.expireLease("a", e)
		h.noop(releaseT("s1", "a", e, OutcomeCompleted), ErrLeaseNotActive)
	})
	t.Run("by the leader without session", func(t *testing.T) {
		h := newHarness(t)
		e := h.grantActive("s1", "a")
		h.ok(releaseT("", "a", e, OutcomeCompleted))
		require.Equal(t, TaskCompleted, h.task("a").State)
	})
}

func TestRevoke(t *testing.T) {
	t.Run("epoch 0 revokes whatever is live", func(t *testing.T) {
		for _, st := range []Status{StatusActive, StatusSuspectDead, StatusExpired} {
			t.Run(string(st), func(t *testing.T) {
				h := newHarness(t)
				e := h.grantActive("s1", "a")
				if st != StatusActive {
					h.ok(leaderOp(OpSuspect, "a", e))
				}
				if st == StatusExpired {
					h.ok(leaderOp(OpExpire, "a", e))
				}
				h.advance(time.Second)
				res := h.ok(revokeT("a", 0))
				require.Equal(t, StatusRevoked, res.Lease.Status)
				require.Equal(t, "operator", res.Lease.Reason)
				require.Equal(t, TaskPending, res.Task.State)
				require.Empty(t, h.m.SessionLeases("s1"))
				h.noop(checkpointT("s1", "a", e, 0, "x"), ErrLeaseNotActive)
				h.noop(revokeT("a", 0), ErrLeaseNotActive)
				h.ok(openS("s2"))
				require.Greater(t, h.ok(claimS("s2")).Lease.Epoch, e)
			})
		}
	})
	t.Run("explicit epoch", func(t *testing.T) {
		h := newHarness(t)
		e := h.grantActive("s1", "a")
		h.noop(revokeT("a", e-1), ErrStaleEpoch)
		h.noop(revokeT("a", e+1), ErrStaleEpoch)
		h.noop(revokeT("ghost", 0), ErrTaskNotFound)
		h.ok(revokeT("a", e))
		require.Equal(t, StatusRevoked, h.task("a").Lease.Status)
		// A revoke for the old epoch after a new grant is stale.
		h.ok(openS("s2"))
		e2 := h.ok(acquireT("s2", "a")).Lease.Epoch
		h.noop(revokeT("a", e), ErrStaleEpoch)
		require.Equal(t, StatusActive, h.task("a").Lease.Status)
		require.Equal(t, e2, h.task("a").Lease.Epoch)
	})
	t.Run("no live lease", func(t *testing.T) {
		h := newHarness(t)
		h.ok(createT("a", 0))
		h.noop(revokeT("a", 0), ErrLeaseNotActive)
		e := h.grantActive("s1", "a")
		h.ok(waitT("s1", "a", e, time.Time{}))
		h.noop(revokeT("a", 0), ErrLeaseNotActive)
	})
}

func TestCancel(t *testing.T) {
	h := newHarness(t)
	h.noop(cancelT("ghost"), ErrTaskNotFound)

	// pending
	h.ok(createT("p", 0))
	res := h.ok(cancelT("p"))
	require.Equal(t, TaskCancelled, res.Task.State)
	require.Equal(t, "cancelled", res.Task.Reason())
	require.Nil(t, res.Lease)

	// leased: the lease is revoked and the worker freed
	e := h.grantActive("s1", "l")
	res = h.ok(cancelT("l"))
	require.Equal(t, StatusRevoked, res.Lease.Status)
	require.Equal(t, e, res.Lease.Epoch)
	require.Empty(t, h.m.SessionLeases("s1"))
	h.noop(checkpointT("s1", "l", e, 0, "x"), ErrLeaseNotActive)

	// waiting
	e = h.grantActive("s1", "w")
	h.ok(waitT("s1", "w", e, t0.Add(time.Minute)))
	res = h.ok(cancelT("w"))
	require.Nil(t, res.Lease)
	require.Equal(t, StatusPausedWaiting, h.task("w").Lease.Status)
	require.Empty(t, h.m.WaitingDue(t0.Add(time.Hour)))
	h.noop(signalT("w", 0), ErrNotWaiting)

	// final tasks cannot be cancelled or acquired
	for _, id := range []string{"p", "l", "w"} {
		h.noop(cancelT(id), ErrTaskFinal)
		h.noop(acquireT("s1", id), ErrTaskFinal)
	}
	h.noop(claimS("s1"), ErrNoTask)
	counts, sessions := h.m.Counts()
	require.Equal(t, map[TaskState]int{TaskCancelled: 3}, counts)
	require.Equal(t, 1, sessions)
}

func TestLeaderTransitions(t *testing.T) {
	h := newHarness(t)
	e := h.grantActive("s1", "a")
	h.ok(openS("s2"))

	// Every leader op checks the epoch and the status it expects.
	for _, op := range []Op{OpSuspect, OpRevive, OpExpire, OpReclaim} {
		h.noop(leaderOp(op, "ghost", e), ErrTaskNotFound)
		h.noop(leaderOp(op, "a", e-1), ErrStaleEpoch)
		h.noop(leaderOp(op, "a", e+1), ErrStaleEpoch)
		h.noop(leaderOp(op, "a", 0), ErrStaleEpoch)
	}
	// From active only suspect applies.
	h.noop(leaderOp(OpRevive, "a", e), ErrLeaseNotActive)
	h.noop(leaderOp(OpExpire, "a", e), ErrLeaseNotActive)
	h.noop(leaderOp(OpReclaim, "a", e), ErrLeaseNotActive)

	h.advance(time.Second)
	res := h.ok(leaderOp(OpSuspect, "a", e))
	require.Equal(t, StatusSuspectDead, res.Lease.Status)
	require.Equal(t, StampOf(h.now), res.Lease.StatusAt)
	require.Equal(t, TaskLeased, res.Task.State)
	require.Equal(t, []string{"a"}, leaseTasks(h.m.SessionLeases("s1")), "a suspect lease is still held")
	h.noop(leaderOp(OpSuspect, "a", e), ErrLeaseNotActive)
	h.noop(leaderOp(OpReclaim, "a", e), ErrLeaseNotActive)
	h.noop(claimS("s2"), ErrNoTask)

	// A late heartbeat revives it with the same epoch; only its holder's.
	h.noop(Command{Op: OpRevive, TaskID: "a", Epoch: e, SessionID: "s2"}, ErrNotHolder)
	h.advance(time.Second)
	res = h.ok(Command{Op: OpRevive, TaskID: "a", Epoch: e, SessionID: "s1"})
	require.Equal(t, StatusActive, res.Lease.Status)
	require.Equal(t, e, res.Lease.Epoch)
	require.Equal(t, StampOf(h.now), res.Lease.HeartbeatAt)
	require.Equal(t, StampOf(h.now.Add(ttl)), res.Lease.ExpiresAt)
	require.Equal(t, e, h.task("a").MaxEpoch, "a revival mints no epoch")

	// suspect -> expired: can never be revived.
	h.ok(leaderOp(OpSuspect, "a", e))
	h.advance(time.Second)
	res = h.ok(leaderOp(OpExpire, "a", e))
	require.Equal(t, StatusExpired, res.Lease.Status)
	h.noop(leaderOp(OpRevive, "a", e), ErrLeaseNotActive)
	h.noop(leaderOp(OpExpire, "a", e), ErrLeaseNotActive)
	h.noop(leaderOp(OpSuspect, "a", e), ErrLeaseNotActive)
	h.noop(claimS("s2"), ErrNoTask)
	h.noop(checkpointT("s1", "a", e, 0, "x"), ErrLeaseNotActive)
	require.Equal(t, []string{"a"}, leaseTasks(h.m.LiveLeases()))

	// expired -> reclaimed: claimable.
	h.advance(time.Second)
	res = h.ok(leaderOp(OpReclaim, "a", e))
	require.Equal(t, StatusReclaimed, res.Lease.Status)
	require.Equal(t, TaskPending, res.Task.State)
	require.Equal(t, StampOf(h.now), res.Task.ClaimableAt)
	require.Empty(t, h.m.LiveLeases())
	for _, op := range []Op{OpSuspect, OpRevive, OpExpire, OpReclaim} {
		h.noop(leaderOp(op, "a", e), ErrLeaseNotActive)
	}
	e2 := h.ok(claimS("s2")).Lease.Epoch
	require.Greater(t, e2, e)
	// Every old-epoch proposal is now stale and changes nothing.
	for _, op := range []Op{OpSuspect, OpRevive, OpExpire, OpReclaim} {
		h.noop(leaderOp(op, "a", e), ErrStaleEpoch)
	}
	require.Equal(t, StatusActive, h.task("a").Lease.Status)
	require.Equal(t, e2, h.task("a").Lease.Epoch)
}

func TestReclaimResumeGuard(t *testing.T) {
	h := newHarness(t)
	e := h.grantActive("s1", "a")
	h.ok(checkpointT("s1", "a", e, 3, "three"))
	d1 := t0.Add(30 * time.Second)
	d2 := t0.Add(40 * time.Second)
	h.ok(intentT("s1", "a", e, "k1", d1))
	h.ok(intentT("s1", "a", e, "k2", d2))
	h.ok(intentT("s1", "a", e, "done", d2))
	h.ok(outcomeT("a", e, "done", 200))
	h.advance(15 * time.Second)
	h.expireLease("a", e)

	// In-flight writes block the reclaim until their deadlines.
	h.noop(leaderOp(OpReclaim, "a", e), ErrIntentsInFlight)
	h.now = d1
	h.noop(leaderOp(OpReclaim, "a", e), ErrIntentsInFlight)
	h.now = d2.Add(-time.Nanosecond)
	h.noop(leaderOp(OpReclaim, "a", e), ErrIntentsInFlight)
	h.now = d2
	res := h.ok(leaderOp(OpReclaim, "a", e))
	require.Len(t, res.InDoubt, 2)
	require.Equal(t, []string{"k1", "k2"}, []string{res.InDoubt[0].Key, res.InDoubt[1].Key})
	for _, eff := range res.InDoubt {
		require.Equal(t, EffectInDoubt, eff.State)
		require.Equal(t, e, eff.Epoch)
	}
	require.Equal(t, StatusReclaimed, res.Lease.Status)
	require.Equal(t, uint64(3), res.Task.Checkpoint.Seq)

	// The next owner gets the checkpoint and the in-doubt effects.
	h.ok(openS("s2"))
	res = h.ok(claimS("s2"))
	e2 := res.Lease.Epoch
	require.Greater(t, e2, e)
	require.Equal(t, Checkpoint{Seq: 3, Step: "three", Data: []byte("data-three"), Epoch: e, At: StampOf(t0)}, *res.Task.Checkpoint)
	states := map[string]EffectState{}
	for _, eff := range res.Task.Journal() {
		states[eff.Key] = eff.State
	}
	require.Equal(t, map[string]EffectState{"k1": EffectInDoubt, "k2": EffectInDoubt, "done": EffectDone}, states)
	h.noop(intentT("s2", "a", e2, "k1", d2.Add(time.Minute)), ErrInDoubt)
	// The reclaim at the old epoch cannot happen twice.
	h.noop(leaderOp(OpReclaim, "a", e), ErrStaleEpoch)
}

func TestReclaimIgnoresOtherEpochsIntents(t *testing.T) {
	h := newHarness(t)
	e := h.grantActive("s1", "a")
	h.ok(intentT("s1", "a", e, "old", t0.Add(time.Hour)))
	h.ok(revokeT("a", e)) // revoke skips the guard; "old" stays an intent
	h.ok(openS("s2"))
	e2 := h.ok(claimS("s2")).Lease.Epoch
	h.expireLease("a", e2)
	// Only the expiring epoch's intents are waited out.
	res := h.ok(leaderOp(OpReclaim, "a", e2))
	require.Empty(t, res.InDoubt)
}

func TestJournal(t *testing.T) {
	h := newHarness(t)
	e := h.grantActive("s1", "a")
	h.ok(openS("s2"))
	dl := t0.Add(time.Minute)

	h.noop(Command{Op: OpIntent, TaskID: "a", Epoch: e}, ErrInvalid)
	h.noop(Command{Op: OpIntent, TaskID: "a", Epoch: e, Effect: &Effect{}}, ErrInvalid)
	h.noop(intentT("s1", "ghost", e, "k", dl), ErrTaskNotFound)
	h.noop(intentT("s1", "a", e+1, "k", dl), ErrStaleEpoch)
	h.noop(intentT("s2", "a", e, "k", dl), ErrNotHolder)
	h.noop(Command{Op: OpOutcome, TaskID: "a", Epoch: e}, ErrInvalid)
	h.noop(outcomeT("a", e, "unknown", 200), ErrInvalid)
	h.noop(outcomeT("ghost", e, "k", 200), ErrTaskNotFound)

	// An intent is recorded with the holder's epoch; the proposer cannot
	// smuggle in an outcome or another epoch.
	c := intentT("s1", "a", e, "k", dl)
	c.Effect.Status, c.Effect.Body, c.Effect.Epoch, c.Effect.State = 201, []byte("forged"), 1, EffectDone
	res := h.ok(c)
	require.Equal(t, Effect{Key: "k", Epoch: e, Method: "POST", URL: "http://downstream/k", BodyDigest: "d-k",
		Deadline: StampOf(dl), State: EffectIntent, RecordedAt: StampOf(h.now)}, *res.Effect)

	// The same owner retrying its intent gets the same record.
	h.advance(time.Second)
	before := stateHash(t, h.m)
	res = h.ok(intentT("s1", "a", e, "k", dl.Add(time.Hour)))
	require.Equal(t, EffectIntent, res.Effect.State)
	require.Equal(t, StampOf(dl), res.Effect.Deadline)
	require.Equal(t, before, stateHash(t, h.m))
	require.Len(t, h.task("a").Journal(), 1)

	// Outcome: stale epoch refused, then recorded, then idempotent.
	h.noop(outcomeT("a", e+1, "k", 200), ErrStaleEpoch)
	res = h.ok(outcomeT("a", e, "k", 200))
	require.Equal(t, EffectDone, res.Effect.State)
	require.Equal(t, 200, res.Effect.Status)
	require.Equal(t, []byte("body-k"), res.Effect.Body)
	require.Equal(t, map[string][]string{"X-K": {"k"}}, res.Effect.Header)
	before = stateHash(t, h.m)
	res = h.ok(outcomeT("a", e, "k", 500))
	require.Equal(t, 200, res.Effect.Status, "the first outcome wins")
	require.Equal(t, before, stateHash(t, h.m))

	// An intent, then the lease is lost: the outcome is still accepted.
	h.ok(intentT("s1", "a", e, "late", dl))
	h.ok(revokeT("a", 0))
	h.noop(intentT("s1", "a", e, "new-after-revoke", dl), ErrLeaseNotActive)
	res = h.ok(outcomeT("a", e, "late", 202))
	require.Equal(t, EffectDone, res.Effect.State)

	// A later owner with a higher epoch repeating a done key gets the
	// recorded response, without a new record.
	e2 := h.ok(acquireT("s2", "a")).Lease.Epoch
	require.Greater(t, e2, e)
	before = stateHash(t, h.m)
	res = h.ok(intentT("s2", "a", e2, "k", dl.Add(time.Hour)))
	require.Equal(t, EffectDone, res.Effect.State)
	require.Equal(t, e, res.Effect.Epoch)
	require.Equal(t, 200, res.Effect.Status)
	require.Equal(t, []byte("body-k"), res.Effect.Body)
	require.Equal(t, before, stateHash(t, h.m))
	// ... but not when its body differs (the takeover case: key K1 with
	// amount=5 done, a new owner sends K1 with amount=7): the journal
	// answers as a fence downstream does, and records nothing.
	other := intentT("s2", "a", e2, "k", dl)
	other.Effect.BodyDigest = "d-other"
	res = h.noop(other, ErrPayloadMismatch)
	require.Equal(t, "d-k", res.Effect.BodyDigest)
	require.Equal(t, before, stateHash(t, h.m))
	// The old owner's outcome for a key is refused from the new epoch.
	h.ok(intentT("s2", "a", e2, "k2", dl))
	h.noop(outcomeT("a", e, "k2", 200), ErrStaleEpoch)

	// An intent of an earlier owner with no outcome is in doubt for a
	// later one (here: left by a revoke, no reclaim).
	h.ok(outcomeT("a", e2, "k2", 200))
	h.ok(intentT("s2", "a", e2, "pending", dl))
	h.ok(revokeT("a", e2))
	e3 := h.ok(acquireT("s1", "a")).Lease.Epoch
	res = h.noop(intentT("s1", "a", e3, "pending", dl), ErrInDoubt)
	require.Equal(t, EffectIntent, res.Effect.State)
	require.Equal(t, e2, res.Effect.Epoch)
	// ... and the old owner may still resolve it.
	h.ok(outcomeT("a", e2, "pending", 200))
	require.Equal(t, EffectDone, h.ok(intentT("s1", "a", e3, "pending", dl)).Effect.State)
}

func TestJournalCompaction(t *testing.T) {
	key := func(i int) string { return fmt.Sprintf("k%04d", i) }
	dl := t0.Add(time.Hour)
	// fill writes a full journal straight into the model (recording a
	// thousand effects one command at a time is slow under -race); done
	// decides which are done.
	fill := func(h *harness, e uint64, done func(int) bool) {
		tk := h.m.tasks["a"]
		for i := range JournalLimit {
			eff := &Effect{Key: key(i), Epoch: e, Deadline: StampOf(dl), State: EffectIntent, RecordedAt: StampOf(h.now)}
			if done(i) {
				eff.State, eff.Status = EffectDone, 200
			}
			tk.More().Journal = append(tk.Journal(), eff)
		}
	}

	h := newHarness(t)
	e := h.grantActive("s1", "a")
	// k0000 is an intent, k0001 the oldest done effect.
	fill(h, e, func(i int) bool { return i%2 == 1 })
	require.Len(t, h.task("a").Journal(), JournalLimit)

	// One more intent drops the oldest done effect, never an intent.
	h.ok(intentT("s1", "a", e, "extra", dl))
	j := h.task("a").Journal()
	require.Len(t, j, JournalLimit)
	require.Equal(t, key(0), j[0].Key)
	require.Equal(t, key(2), j[1].Key, "the oldest done effect (k0001) was dropped")
	require.Equal(t, "extra", j[len(j)-1].Key)
	// The dropped key is no longer known (a new intent); k0003 still is.
	require.Equal(t, EffectDone, h.ok(intentT("s1", "a", e, key(3), dl)).Effect.State)
	require.Equal(t, EffectIntent, h.ok(intentT("s1", "a", e, key(1), dl)).Effect.State)
	require.Len(t, h.task("a").Journal(), JournalLimit)

	// A journal of intents only cannot be compacted: full.
	h2 := newHarness(t)
	e = h2.grantActive("s1", "a")
	fill(h2, e, func(int) bool { return false })
	h2.noop(intentT("s1", "a", e, "extra", dl), ErrJournalFull)
	// Known keys are still answered.
	require.Equal(t, key(5), h2.ok(intentT("s1", "a", e, key(5), dl)).Effect.Key)
	// Recording one outcome makes room again.
	h2.ok(outcomeT("a", e, key(7), 200))
	h2.ok(intentT("s1", "a", e, "extra", dl))
	require.Len(t, h2.task("a").Journal(), JournalLimit)
	_, found := findEffect(h2.task("a"), key(7))
	require.False(t, found)
}

func findEffect(t *Task, key string) (*Effect, bool) {
	for _, e := range t.Journal() {
		if e.Key == key {
			return e, true
		}
	}
	return nil, false
}

func TestDeleteAndRecreate(t *testing.T) {
	h := newHarness(t)
	h.noop(deleteT("ghost"), ErrTaskNotFound)
	h.ok(createT("a", 0))
	h.noop(deleteT("a"), ErrInvalid)

	// Give "a" a long history of epochs, then finish it.
	h.ok(openS("s1"))
	var epochs []uint64
	for range 3 {
		e := h.ok(acquireT("s1", "a")).Lease.Epoch
		epochs = append(epochs, e)
		h.ok(checkpointT("s1", "a", e, 0, "x"))
		h.noop(deleteT("a"), ErrInvalid)
		h.ok(releaseT("s1", "a", e, OutcomeGivenBack))
	}
	e := h.ok(acquireT("s1", "a")).Lease.Epoch
	epochs = append(epochs, e)
	h.ok(releaseT("s1", "a", e, OutcomeCompleted))
	oldMax := h.task("a").MaxEpoch
	require.Equal(t, e, oldMax)

	res := h.ok(deleteT("a"))
	require.Equal(t, TaskCompleted, res.Task.State)
	_, ok := h.m.Task("a")
	require.False(t, ok)
	h.noop(deleteT("a"), ErrTaskNotFound)
	h.noop(checkpointT("s1", "a", e, 0, "x"), ErrTaskNotFound)

	// Re-created (both ways), the task starts afresh but its epochs stay
	// above every epoch the deleted one ever had (I2 across re-creation).
	for _, recreate := range []func() uint64{
		func() uint64 { h.ok(createT("a", 0)); return h.ok(acquireT("s1", "a")).Lease.Epoch },
		func() uint64 {
			return h.ok(Command{Op: OpAcquire, SessionID: "s1", TaskID: "a", Create: true, TTL: ttl}).Lease.Epoch
		},
	} {
		ne := recreate()
		tk := h.task("a")
		require.Nil(t, tk.Checkpoint)
		require.Equal(t, uint64(1), tk.Attempts)
		require.Empty(t, tk.History())
		for _, old := range epochs {
			require.Greater(t, ne, old)
		}
		epochs = append(epochs, ne)
		h.ok(cancelT("a"))
		h.ok(deleteT("a"))
	}
}

func TestRequestIDDedup(t *testing.T) {
	h := newHarness(t)
	h.ok(openS("s1"))
	h.ok(openS("s2"))
	h.ok(createT("a", 0))
	h.ok(createT("b", 0))

	// A retried claim is not a second grant.
	c := claimS("s1")
	c.RequestID = "rid-claim"
	first := h.ok(c)
	require.False(t, first.Duplicate)
	h.advance(time.Second)
	before := stateHash(t, h.m)
	again := h.ok(c)
	require.True(t, again.Duplicate)
	require.Equal(t, first.Task.ID, again.Task.ID)
	require.Equal(t, first.Lease.Epoch, again.Lease.Epoch)
	require.Equal(t, StatusActive, again.Lease.Status)
	require.Equal(t, before, stateHash(t, h.m), "a duplicate must not change the state")
	require.Len(t, h.m.SessionLeases("s1"), 1, "no second task was claimed")

	// A retried acquire returns the same epoch even after the lease moved on.
	a := acquireT("s2", "b")
	a.RequestID = "rid-acq"
	first = h.ok(a)
	h.ok(releaseT("s2", "b", first.Lease.Epoch, OutcomeGivenBack))
	again = h.ok(a)
	require.True(t, again.Duplicate)
	require.Equal(t, first.Lease.Epoch, again.Lease.Epoch)
	require.Equal(t, StatusReleased, again.Lease.Status, "the replay shows the lease as it is now")
	require.Equal(t, TaskPending, h.task("b").State, "no second grant")
	require.Equal(t, uint64(1), h.task("b").Attempts)

	// Errors are replayed too, even when a retry would now succeed.
	x := acquireT("s2", "a")
	x.RequestID = "rid-err"
	h.fail(x, ErrLeaseHeld)
	h.ok(releaseT("s1", "a", h.task("a").Lease.Epoch, OutcomeGivenBack))
	res := h.fail(x, ErrLeaseHeld)
	require.True(t, res.Duplicate)
	require.Equal(t, TaskPending, h.task("a").State)

	// A duplicate checkpoint with an explicit seq is not ErrCheckpointSeq.
	e := h.ok(acquireT("s1", "a")).Lease.Epoch
	cp := checkpointT("s1", "a", e, 0, "once")
	cp.RequestID = "rid-cp"
	require.Equal(t, uint64(1), h.ok(cp).Task.Checkpoint.Seq)
	res = h.ok(cp)
	require.True(t, res.Duplicate)
	require.Equal(t, uint64(1), h.task("a").Checkpoint.Seq, "seq 0 replayed must not advance twice")

	// Effects are replayed.
	in := intentT("s1", "a", e, "k", t0.Add(time.Hour))
	in.RequestID = "rid-intent"
	h.ok(in)
	res = h.ok(in)
	require.True(t, res.Duplicate)
	require.Equal(t, "k", res.Effect.Key)

	// After DedupWindow the id is forgotten and applied afresh.
	h.advance(DedupWindow - time.Second - time.Nanosecond)
	require.True(t, h.ok(c).Duplicate, "still inside the window")
	h.advance(time.Nanosecond)
	prevMax := h.task("b").MaxEpoch
	res = h.ok(c)
	require.False(t, res.Duplicate, "rid-claim was recorded a window ago")
	require.Equal(t, "b", res.Task.ID, "applied afresh: a second grant")
	require.Greater(t, res.Lease.Epoch, prevMax)
	require.True(t, h.ok(cp).Duplicate, "rid-cp is younger")
	h.advance(time.Hour)
	h.apply(openS("s1"))
	require.Zero(t, h.m.dedup.len(), "every old id was pruned")
	require.Zero(t, h.m.dedup.byID.n, "and left the index")
}

func TestResultCopiesAreIndependent(t *testing.T) {
	h := newHarness(t)
	c := createT("a", 0)
	c.Payload = []byte("payload")
	h.ok(c)
	e := h.grantActive("s1", "a")
	h.ok(checkpointT("s1", "a", e, 1, "one"))
	h.ok(intentT("s1", "a", e, "k", t0.Add(time.Hour)))
	h.ok(outcomeT("a", e, "k", 200))
	h.ok(waitT("s1", "a", e, time.Time{}))
	h.ok(signalT("a", e))
	h.ok(claimS("s1"))

	before := stateHash(t, h.m)
	for _, res := range []Result{
		h.apply(Command{Op: OpIntent, TaskID: "a", Effect: &Effect{Key: "k"}}),
		{Task: h.task("a")},
		{Task: h.m.Tasks(TaskFilter{})[0]},
	} {
		tk := res.Task
		tk.State = TaskCompleted
		tk.MaxEpoch = 1
		tk.Lease.Status = StatusRevoked
		tk.Lease.Epoch = 1
		tk.History()[0].Status = StatusActive
		tk.Checkpoint.Seq = 99
		tk.Checkpoint.Data[0] = 'X'
		tk.Payload[0] = 'X'
		tk.Signal()[0] = 'X'
		tk.Journal()[0].State = EffectIntent
		tk.Journal()[0].Body[0] = 'X'
		tk.Journal()[0].Header["X-K"][0] = "forged"
		tk.Journal()[0].Header["X-New"] = []string{"x"}
		tk.More().Journal = append(tk.Journal()[:0], &Effect{Key: "forged"})
		if res.Effect != nil {
			res.Effect.State = EffectInDoubt
			res.Effect.Body[0] = 'Y'
			res.Effect.Header["X-K"][0] = "forged"
		}
	}
	for _, l := range h.m.LiveLeases() {
		l.Epoch = 1
	}
	ls := h.m.SessionLeases("s1")
	ls[0].Status = StatusRevoked
	ss := h.m.Sessions()
	ss[0].WorkerID = "forged"
	s, _ := h.m.Session("s1")
	s.WorkerID = "forged"
	require.Equal(t, before, stateHash(t, h.m), "mutating a returned copy changed the model")
}

func TestReads(t *testing.T) {
	h := newHarness(t)
	for _, id := range []string{"c", "a", "d", "b"} {
		h.ok(createT(id, 0))
	}
	h.grantActive("s1", "b")
	e := h.grantActive("s1", "d")
	h.ok(leaderOp(OpSuspect, "d", e))
	ids := func(ts []*Task) []string {
		out := []string{}
		for _, t := range ts {
			out = append(out, t.ID)
		}
		return out
	}
	require.Equal(t, []string{"a", "b", "c", "d"}, ids(h.m.Tasks(TaskFilter{})))
	require.Equal(t, []string{"a", "c"}, ids(h.m.Tasks(TaskFilter{State: TaskPending})))
	require.Equal(t, []string{"d"}, ids(h.m.Tasks(TaskFilter{Status: StatusSuspectDead})))
	require.Equal(t, []string{"c", "d"}, ids(h.m.Tasks(TaskFilter{After: "b"})))
	require.Equal(t, []string{"b", "c"}, ids(h.m.Tasks(TaskFilter{After: "a", Limit: 2})))
	require.Equal(t, h.idx, h.m.LastIndex())
	counts, n := h.m.Counts()
	require.Equal(t, map[TaskState]int{TaskPending: 2, TaskLeased: 2}, counts)
	require.Equal(t, 1, n)
}

func TestErrorCodes(t *testing.T) {
	// The names are written to snapshots and problem types: pinned here.
	stable := map[error]string{
		ErrInvalid: "invalid", ErrTaskNotFound: "task_not_found", ErrTaskExists: "task_exists",
		ErrSessionNotFound: "session_not_found", ErrLeaseHeld: "lease_held", ErrTaskWaiting: "task_waiting",
		ErrTaskFinal: "task_final", ErrNotClaimable: "not_claimable", ErrNoTask: "no_task",
		ErrStaleEpoch: "stale_epoch", ErrNotHolder: "not_holder", ErrLeaseNotActive: "lease_not_active",
		ErrCheckpointSeq: "checkpoint_seq", ErrNotWaiting: "not_waiting", ErrIntentsInFlight: "intents_in_flight",
		ErrInDoubt: "in_doubt", ErrJournalFull: "journal_full", ErrPayloadMismatch: "payload_mismatch",
		ErrRequestReused: "request_id_reused", ErrNotOwner: "not_owner", ErrQuota: "quota_exceeded",
		ErrCheckpointSeqJump: "checkpoint_seq_jump",
	}
	require.Len(t, errorTable, len(stable)+1)
	require.Len(t, Errors(), len(stable))
	for e, code := range stable {
		require.Equal(t, code, ErrorCode(fmt.Errorf("wrapped: %w", e)))
		require.Equal(t, e, codeNamed(code).err())
		require.Equal(t, code, codeNamed(code).String())
		info, ok := LookupError(fmt.Errorf("wrapped: %w", e))
		require.True(t, ok)
		require.Equal(t, code, info.Code)
	}
	// Statuses are part of the API contract too. ErrNotHolder is a
	// conflict with the lease's state (409), like a stale epoch; 403 is
	// kept for refusals of the caller's identity.
	statuses := map[int][]error{
		400: {ErrInvalid},
		404: {ErrTaskNotFound, ErrSessionNotFound, ErrNoTask},
		409: {ErrTaskExists, ErrLeaseHeld, ErrTaskWaiting, ErrTaskFinal, ErrNotClaimable, ErrStaleEpoch,
			ErrNotHolder, ErrLeaseNotActive, ErrCheckpointSeq, ErrNotWaiting, ErrIntentsInFlight, ErrInDoubt, ErrJournalFull,
			ErrCheckpointSeqJump},
		403: {ErrNotOwner},
		422: {ErrPayloadMismatch, ErrRequestReused},
		429: {ErrQuota},
	}
	n := 0
	for status, errs := range statuses {
		for _, e := range errs {
			info, ok := LookupError(e)
			require.True(t, ok)
			require.Equal(t, status, info.Status, "%v", e)
			n++
		}
	}
	require.Equal(t, len(stable), n)
	_, ok := LookupError(errors.New("other"))
	require.False(t, ok)
	require.Equal(t, errCodeID(0), codeNamed(""))
	require.Equal(t, codeInvalid, codeNamed("from-a-newer-version"))
	require.Equal(t, "", ErrorCode(nil))
	require.Equal(t, "invalid", ErrorCode(errors.New("other")))
	require.Equal(t, "unknown", Op(0).String())
	require.Equal(t, "acquire", OpAcquire.String())
}

func TestHistoryLimit(t *testing.T) {
	h := newHarness(t)
	h.ok(openS("s1"))
	h.ok(createT("a", 0))
	first := acquireT("s1", "a")
	first.RequestID = "rid-first"
	var epochs []uint64
	for i := range HistoryLimit + 5 {
		c := acquireT("s1", "a")
		if i == 0 {
			c = first
		}
		e := h.ok(c).Lease.Epoch
		epochs = append(epochs, e)
		h.ok(releaseT("s1", "a", e, OutcomeGivenBack))
	}
	tk := h.task("a")
	require.Len(t, tk.History(), HistoryLimit)
	var kept []uint64
	for _, l := range tk.History() {
		kept = append(kept, l.Epoch)
	}
	n := len(epochs)
	require.Equal(t, epochs[n-HistoryLimit-1:n-1], kept, "the newest closed leases are kept, in order")
	require.Equal(t, epochs[n-1], tk.Lease.Epoch)
	require.Equal(t, uint64(n), tk.Attempts)

	// A retried acquire whose lease left the history still reports its
	// first outcome, without a lease to show.
	res := h.ok(first)
	require.True(t, res.Duplicate)
	require.Nil(t, res.Lease)
	require.Equal(t, epochs[n-1], h.task("a").MaxEpoch, "no new grant")
}
