package raftstore

import (
	"iter"
	"sync"
	"testing"
	"time"

	"github.com/fencepost/fencepost/fence/lease"
	"github.com/stretchr/testify/require"
)

// fakeClock is a Clock tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

const (
	lTTL   = 10 * time.Second
	lGrace = 2 * time.Second
)

// lessorModel drives a real lease.Model with the lessor's plans, as the
// leader's expiry loop does, without raft.
type lessorModel struct {
	t     *testing.T
	clock *fakeClock
	m     *lease.Model
	l     *lessor
	index uint64
}

func newLessorModel(t *testing.T) *lessorModel {
	c := newFakeClock()
	return &lessorModel{t: t, clock: c, m: lease.New(), l: newLessor(c, lGrace, time.Hour, nil)}
}

func (lm *lessorModel) apply(cmd lease.Command) lease.Result {
	lm.index++
	if cmd.Time.IsZero() {
		cmd.Time = lm.clock.Now()
	}
	return lm.m.Apply(lm.index, &cmd)
}

// grant opens a session and grants it a fresh task; it returns the lease.
func (lm *lessorModel) grant(task, session string) lease.Lease {
	lm.apply(lease.Command{Op: lease.OpOpenSession, SessionID: session, WorkerID: "w-" + session})
	res := lm.apply(lease.Command{Op: lease.OpAcquire, TaskID: task, SessionID: session, Create: true, TTL: lTTL, Heartbeat: lTTL / 3})
	require.NoError(lm.t, res.Err)
	return *res.Lease
}

// tick runs one expiry plan and applies it; it returns the ops proposed.
func (lm *lessorModel) tick() []lease.Op {
	in := expiryInput{Leases: lm.m.LiveScan(), IntentsUntil: lm.m.IntentsUntil, Waiting: map[string]uint64{}, Sessions: lm.m.SessionIDs(), Profile: lm.m.TaskProfile}
	for _, id := range lm.m.WaitingDue(lm.clock.Now()) {
		t, _ := lm.m.Task(id)
		in.Waiting[id] = t.Lease.Epoch
	}
	var ops []lease.Op
	for _, c := range lm.l.plan(in, 100) {
		ops = append(ops, c.Op)
		lm.apply(c)
	}
	return ops
}

func (lm *lessorModel) status(task string) lease.Status {
	t, ok := lm.m.Task(task)
	require.True(lm.t, ok)
	return t.Lease.Status
}

func (lm *lessorModel) heartbeat(session string) {
	lm.l.renew(lm.clock.Now(), session)
}

func TestLessorRenewExtends(t *testing.T) {
	lm := newLessorModel(t)
	lm.l.promote(nil, nil)
	lm.grant("a", "s1")
	for range 5 {
		lm.clock.Advance(lTTL - time.Second)
		lm.heartbeat("s1")
		require.Empty(t, lm.tick(), "a renewed lease must not be suspected")
		require.Equal(t, lease.StatusActive, lm.status("a"))
	}
	l, _ := lm.m.Task("a")
	require.Equal(t, lm.clock.Now().Add(lTTL), lm.l.deadline(*l.Lease))
}

// One heartbeat renews every lease of its session, including one granted
// while the heartbeat was on its way, and none of another session's.
func TestLessorRenewCoversTheWholeSession(t *testing.T) {
	lm := newLessorModel(t)
	lm.l.promote(nil, nil)
	a, b := lm.grant("a", "s1"), lm.grant("b", "s1")
	other := lm.grant("c", "s2")
	lm.clock.Advance(lTTL - time.Second)
	recv := lm.clock.Now()
	lm.heartbeat("s1")
	// Granted under a command time stamped before the heartbeat arrived
	// but applied after it (a proposal in flight): still covered.
	late := lm.apply(lease.Command{Op: lease.OpAcquire, TaskID: "d", SessionID: "s1", Create: true,
		TTL: lTTL, Heartbeat: lTTL / 3, Time: recv.Add(-5 * time.Second)})
	require.NoError(t, late.Err)

	for _, l := range []lease.Lease{a, b, *late.Lease} {
		require.Equal(t, recv.Add(lTTL), lm.l.deadline(l), "lease %s renewed by the session's heartbeat", l.TaskID)
	}
	require.Equal(t, other.ExpiresAt.Time(), lm.l.deadline(other), "another session's lease is not renewed")

	lm.clock.Advance(2 * time.Second)
	require.Equal(t, []lease.Op{lease.OpSuspect}, lm.tick(), "only the quiet session's lease is suspected")
	require.Equal(t, lease.StatusSuspectDead, lm.status("c"))
	for _, task := range []string{"a", "b", "d"} {
		require.Equal(t, lease.StatusActive, lm.status(task))
	}

	// An expired lease is never renewed, whatever its session sends.
	lm.clock.Advance(lGrace + time.Millisecond)
	require.Equal(t, []lease.Op{lease.OpExpire}, lm.tick())
	lm.heartbeat("s2")
	tc, _ := lm.m.Task("c")
	require.Equal(t, lease.StatusExpired, tc.Lease.Status)
	require.Equal(t, tc.Lease.ExpiresAt.Time(), lm.l.deadline(*tc.Lease), "an expired lease keeps its deadline")

	lm.l.demote()
	require.Equal(t, a.ExpiresAt.Time(), lm.l.deadline(a), "a demoted lessor forgets every renewal")
}

func TestLessorSuspectThenRevive(t *testing.T) {
	lm := newLessorModel(t)
	lm.l.promote(nil, nil)
	g := lm.grant("a", "s1")
	lm.clock.Advance(lTTL)
	require.Empty(t, lm.tick(), "exactly at the deadline is not overdue")
	lm.clock.Advance(time.Millisecond)
	require.Equal(t, []lease.Op{lease.OpSuspect}, lm.tick())
	require.Equal(t, lease.StatusSuspectDead, lm.status("a"))

	// A late heartbeat within the grace: the store proposes a revive with
	// the same epoch; the renewal keeps the expiry loop away meanwhile.
	lm.clock.Advance(lGrace / 2)
	lm.heartbeat("s1")
	require.Empty(t, lm.tick())
	res := lm.apply(lease.Command{Op: lease.OpRevive, TaskID: "a", Epoch: g.Epoch, SessionID: "s1"})
	require.NoError(t, res.Err)
	require.Equal(t, g.Epoch, res.Lease.Epoch, "revive keeps the epoch")
	require.Equal(t, lease.StatusActive, lm.status("a"))
	lm.clock.Advance(lTTL - time.Millisecond)
	require.Empty(t, lm.tick())
}

func TestLessorSuspectExpireReclaim(t *testing.T) {
	lm := newLessorModel(t)
	lm.l.promote(nil, nil)
	g := lm.grant("a", "s1")
	lm.apply(lease.Command{Op: lease.OpCheckpoint, TaskID: "a", SessionID: "s1", Epoch: g.Epoch, Step: "one", Data: []byte("x")})
	lm.clock.Advance(lTTL + time.Millisecond)
	require.Equal(t, []lease.Op{lease.OpSuspect}, lm.tick())
	lm.clock.Advance(lGrace - time.Millisecond)
	require.Empty(t, lm.tick(), "grace not over yet")
	lm.clock.Advance(time.Millisecond)
	require.Equal(t, []lease.Op{lease.OpExpire}, lm.tick())
	require.Equal(t, lease.StatusExpired, lm.status("a"))
	require.Equal(t, []lease.Op{lease.OpReclaim}, lm.tick())
	require.Equal(t, lease.StatusReclaimed, lm.status("a"))
	require.Empty(t, lm.tick())

	// The next owner gets a higher epoch and the checkpoint.
	lm.apply(lease.Command{Op: lease.OpOpenSession, SessionID: "s2", WorkerID: "w2"})
	res := lm.apply(lease.Command{Op: lease.OpClaim, SessionID: "s2"})
	require.NoError(t, res.Err)
	require.Greater(t, res.Lease.Epoch, g.Epoch)
	require.Equal(t, "one", res.Task.Checkpoint.Step)
}

func TestLessorReclaimWaitsForIntents(t *testing.T) {
	lm := newLessorModel(t)
	lm.l.promote(nil, nil)
	g := lm.grant("a", "s1")
	res := lm.apply(lease.Command{Op: lease.OpIntent, TaskID: "a", SessionID: "s1", Epoch: g.Epoch,
		Effect: &lease.Effect{Key: "k", Method: "POST", Deadline: lease.StampOf(lm.clock.Now().Add(lTTL + lGrace + 5*time.Second))}})
	require.NoError(t, res.Err)
	lm.clock.Advance(lTTL + time.Millisecond)
	lm.tick()
	lm.clock.Advance(lGrace + time.Millisecond)
	lm.tick()
	require.Equal(t, lease.StatusExpired, lm.status("a"))
	in := expiryInput{Leases: lm.m.LiveScan(), IntentsUntil: lm.m.IntentsUntil}
	until, ok := lm.m.IntentsUntil("a", g.Epoch)
	require.True(t, ok)
	require.Equal(t, g.AcquiredAt.Add(lTTL+lGrace+5*time.Second).Time(), until)
	require.Empty(t, lm.l.plan(in, 10), "no reclaim while an intent is in flight")
	lm.clock.Advance(5 * time.Second)
	cmds := lm.l.plan(in, 10)
	require.Len(t, cmds, 1)
	require.Equal(t, lease.OpReclaim, cmds[0].Op)
}

func TestLessorPromoteExtendsNeverShortensAndSpreads(t *testing.T) {
	c := newFakeClock()
	l := newLessor(c, lGrace, time.Hour, nil)
	start := c.Now()
	var leases []lease.Lease
	for i := range 200 {
		leases = append(leases, lease.Lease{TaskID: "t" + string(rune('A'+i%26)) + string(rune('a'+i/26)), Epoch: uint64(i + 1),
			TTL: lTTL, Status: lease.StatusActive, ExpiresAt: lease.StampOf(start.Add(time.Second))})
	}
	// One lease was renewed by this node far into the future earlier
	// (it led before, and LeaderCh coalesced the change): keep it.
	far := start.Add(time.Hour)
	l.deadlines[leaseKey{leases[0].TaskID, leases[0].Epoch}] = tracked{at: far}
	l.promote(leases, []string{"s1"})

	distinct := map[time.Time]bool{}
	for i, ls := range leases {
		d := l.deadline(ls)
		if i == 0 {
			require.Equal(t, far, d, "promote must never shorten a deadline")
			continue
		}
		require.False(t, d.Before(start.Add(lTTL)), "every lease gets at least now + TTL")
		require.True(t, d.Before(start.Add(lTTL+lTTL/10)), "stagger stays within 10%% of TTL")
		distinct[d] = true
		// Deterministic per lease.
		require.Equal(t, start.Add(lTTL+l.stagger(leaseKey{ls.TaskID, ls.Epoch}, lTTL)), d)
	}
	require.Greater(t, len(distinct), 150, "expiries are spread, not one storm")

	// A second promote later extends again, never back.
	c.Advance(time.Second)
	before := l.deadline(leases[5])
	l.promote(leases, nil)
	require.False(t, l.deadline(leases[5]).Before(before))
	require.False(t, l.deadline(leases[5]).Before(c.Now().Add(lTTL)))

	// Nothing expires before now + TTL after a promote.
	in := expiryInput{Leases: seqOf(leases)}
	c.Advance(lTTL - time.Millisecond)
	require.Empty(t, l.plan(in, 1000))

	l.demote()
	require.Empty(t, l.plan(in, 1000), "a demoted lessor proposes nothing")
	require.ErrorIs(t, l.renew(c.Now(), "s1"), ErrNotLeader, "a demoted lessor renews nothing")
}

func TestLessorRateLimitAndIdleSessions(t *testing.T) {
	lm := newLessorModel(t)
	lm.l.idle = 30 * time.Second
	lm.l.promote(nil, nil)
	for i := range 10 {
		lm.grant("t"+string(rune('a'+i)), "s"+string(rune('a'+i)))
	}
	lm.clock.Advance(lTTL + time.Millisecond)
	require.Len(t, lm.l.plan(expiryInput{Leases: lm.m.LiveScan()}, 3), 3, "at most limit proposals per tick")
	ops := lm.tick()
	require.Len(t, ops, 10)

	// Sessions with no heartbeat for longer than idle are closed.
	lm.clock.Advance(31 * time.Second)
	lm.heartbeat("sa")
	var closes int
	for _, op := range lm.tick() {
		if op == lease.OpCloseSession {
			closes++
		}
	}
	require.Equal(t, 9, closes)
	_, ok := lm.m.Session("sa")
	require.True(t, ok)
}

// Once a tick has proposed closing an idle session, no heartbeat of it is
// acknowledged until the close is done: the close gives its leases back.
func TestLessorRefusesRenewalWhileIdleCloseInFlight(t *testing.T) {
	lm := newLessorModel(t)
	lm.l.idle = 30 * time.Second
	lm.l.promote(nil, nil)
	lm.grant("a", "s1")
	require.Empty(t, lm.tick(), "the first tick only notes the session")
	lm.clock.Advance(31 * time.Second)
	in := expiryInput{Leases: lm.m.LiveScan(), IntentsUntil: lm.m.IntentsUntil, Sessions: lm.m.SessionIDs()}
	var closing bool
	for _, c := range lm.l.plan(in, 100) {
		closing = closing || c.Op == lease.OpCloseSession && c.SessionID == "s1"
	}
	require.True(t, closing, "the idle session is to be closed")

	err := lm.l.renew(lm.clock.Now(), "s1")
	require.ErrorIs(t, err, lease.ErrSessionNotFound, "a heartbeat racing the close is refused")

	// The close was refused (say, it lost a race): the session may
	// heartbeat again, and is no longer idle.
	lm.l.closeDone("s1")
	require.NoError(t, lm.l.renew(lm.clock.Now(), "s1"))
	for _, c := range lm.l.plan(expiryInput{Leases: lm.m.LiveScan(), Sessions: lm.m.SessionIDs()}, 100) {
		require.NotEqual(t, lease.OpCloseSession, c.Op, "a session heard from just now is not idle")
	}
}

// A session closed and opened again under the same id keeps the renewals
// acknowledged to the new incarnation: only the sweep, which reads the
// model, drops a session's entry, and it drops only closed ones.
func TestLessorKeepsRenewalOfReopenedSession(t *testing.T) {
	lm := newLessorModel(t)
	lm.l.promote(nil, nil)
	lm.grant("a", "s1")
	require.NoError(t, lm.apply(lease.Command{Op: lease.OpCloseSession, SessionID: "s1"}).Err)
	b := lm.grant("b", "s1") // opens s1 again
	lm.clock.Advance(lTTL / 2)
	recv := lm.clock.Now()
	lm.heartbeat("s1")
	require.Empty(t, lm.tick())
	require.Equal(t, recv.Add(lTTL), lm.l.deadline(b), "the acknowledged renewal survives the sweep")

	require.NoError(t, lm.apply(lease.Command{Op: lease.OpCloseSession, SessionID: "s1"}).Err)
	lm.tick()
	_, tracked := lm.l.lastHeartbeat("s1")
	require.False(t, tracked, "a closed session's entry is swept")
}

func TestLessorWaitDeadlineSignals(t *testing.T) {
	lm := newLessorModel(t)
	lm.l.promote(nil, nil)
	g := lm.grant("a", "s1")
	res := lm.apply(lease.Command{Op: lease.OpWait, TaskID: "a", SessionID: "s1", Epoch: g.Epoch, Deadline: lease.StampOf(lm.clock.Now().Add(time.Minute))})
	require.NoError(t, res.Err)
	lm.clock.Advance(time.Minute - time.Millisecond)
	require.Empty(t, lm.tick())
	lm.clock.Advance(time.Millisecond)
	require.Equal(t, []lease.Op{lease.OpSignal}, lm.tick())
	tk, _ := lm.m.Task("a")
	require.Equal(t, lease.TaskPending, tk.State)
}

// seqOf yields pointers into leases, the shape of lease.Model.LiveScan.
func seqOf(leases []lease.Lease) iter.Seq[*lease.Lease] {
	return func(yield func(*lease.Lease) bool) {
		for i := range leases {
			if !yield(&leases[i]) {
				return
			}
		}
	}
}

func TestLessorForgetsEndedLeasesOnly(t *testing.T) {
	lm := newLessorModel(t)
	lm.l.promote(nil, nil)
	var grants []lease.Lease
	for i := range 6 {
		grants = append(grants, lm.grant("t"+string(rune('a'+i)), "s"+string(rune('a'+i))))
	}
	require.Empty(t, lm.tick())
	require.Len(t, lm.l.deadlines, 6, "every live lease is tracked")

	// Session sa keeps heartbeating; the others go quiet.
	lm.clock.Advance(lTTL / 2)
	lm.heartbeat("sa")
	kept := lm.l.deadline(grants[0])
	res := lm.apply(lease.Command{Op: lease.OpRelease, TaskID: "tb", SessionID: "sb", Epoch: grants[1].Epoch, Outcome: "given_back"})
	require.NoError(t, res.Err)

	// More leases are due than one tick may propose: the limited tick must
	// still keep the renewed deadline and drop only the released lease.
	lm.clock.Advance(lTTL/2 + time.Millisecond)
	in := expiryInput{Leases: lm.m.LiveScan(), IntentsUntil: lm.m.IntentsUntil, Sessions: lm.m.SessionIDs()}
	require.Len(t, lm.l.plan(in, 2), 2)
	require.Len(t, lm.l.deadlines, 5, "the released lease is forgotten")
	require.Equal(t, kept, lm.l.deadline(grants[0]), "a live lease keeps its renewal across a limited tick")
}
