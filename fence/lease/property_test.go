package lease

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestModelProperties drives the model with random command sequences: three
// sessions, four task ids, every op (leader ops with current, stale, zero
// and never-granted epochs), random clock steps (some longer than the
// dedup window), retried request ids and snapshot/restore round-trips. After
// every step it checks the invariants below. rapid prints the drawn steps
// (and the applied history is logged) when one breaks; re-run with the
// -rapid.seed it prints.
func TestModelProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		s := newSim()
		// A prelude, so that short runs reach leases too.
		for _, c := range []Command{openS("s1"), openS("s2"), createT("t1", 0), createT("t2", 1)} {
			s.step(rt, step{Cmd: c})
		}
		maxSteps := 200
		if raceEnabled {
			maxSteps = 60
		}
		n := rapid.IntRange(1, maxSteps).Draw(rt, "steps")
		for range n {
			st := rapid.Custom(s.genStep).Draw(rt, "step")
			s.step(rt, st)
		}
	})
}

type sent struct {
	cmd  Command
	res  Result
	at   time.Time
	code string
}

type grantRec struct {
	task, session string
}

// sim is the reference bookkeeping of one property run.
type sim struct {
	a *Model // under test; sometimes replaced by a snapshot round-trip
	b *Model // twin: same commands, never restored (Hash determinism)

	idx  uint64
	now  time.Time
	rids int
	sent []sent // commands sent with a request id, for retries

	everMax map[string]uint64     // highest epoch ever granted per task id (survives deletion)
	lastMax map[string]uint64     // MaxEpoch per existing task after the last step
	grants  map[uint64]grantRec   // every granted epoch: to whom
	acked   map[string]Checkpoint // last acknowledged checkpoint per existing task
	final   map[string]*Task      // tasks seen in a final state
}

func newSim() *sim {
	return &sim{
		a: New(), b: New(), now: t0,
		everMax: map[string]uint64{}, lastMax: map[string]uint64{}, grants: map[uint64]grantRec{},
		acked: map[string]Checkpoint{}, final: map[string]*Task{},
	}
}

// genStep draws one step. Its choices come from a PCG seeded by one rapid
// draw: rapid's integers lean towards small values, which would make the
// first ops of every list far more frequent than the rest (and the long
// grant -> suspect -> expire -> reclaim chains rare). Shrinking still removes
// steps and simplifies the rest.
func (s *sim) genStep(t *rapid.T) step {
	seed := rapid.Uint64().Draw(t, "seed")
	ch := randChooser{rand.New(rand.NewPCG(splitmix(seed), splitmix(^seed)))}
	st := step{Advance: pick(ch, genSteps)}
	switch k := ch.intn(20); {
	case k == 0:
		st.Snapshot = true
	case k <= 2 && len(s.sent) > 0:
		st.Retry = 1 + ch.intn(min(len(s.sent), 8))
	default:
		st.Cmd = genCommand(ch, s.a, s.now.Add(st.Advance))
		if ch.intn(3) == 0 {
			s.rids++
			st.Cmd.RequestID = fmt.Sprintf("r%d", s.rids)
		}
	}
	return st
}

func (s *sim) step(t *rapid.T, st step) {
	s.now = s.now.Add(st.Advance)
	if st.Snapshot {
		before := s.a.Hash()
		s.a = roundTrip(t, s.a)
		require.Equal(t, before, s.a.Hash(), "snapshot round-trip changed the hash")
		t.Logf("   snapshot/restore")
		s.check(t, Command{}, Result{})
		return
	}
	var orig *sent
	c := st.Cmd
	if st.Retry > 0 {
		orig = &s.sent[len(s.sent)-st.Retry]
		c = orig.cmd
	}
	c.Time = s.now

	// Expectations computed before applying.
	wantDup := false
	if c.RequestID != "" {
		if d, ok := s.a.dedup.get(c.RequestID); ok && s.now.Sub(d.at.Time()) < DedupWindow {
			wantDup = true
		}
	}
	wantClaim := ""
	if c.Op == OpClaim && !wantDup {
		wantClaim = s.expectedClaim()
	}
	before := coreHash(t, s.a)
	var pre *Lease // the lease the command names, as it was before
	newKey := c.Effect != nil
	if tk, ok := s.a.tasks[c.TaskID]; ok {
		if tk.Lease != nil {
			l := *tk.Lease
			pre = &l
		}
		if c.Effect != nil && tk.effect(c.Effect.Key) != nil {
			newKey = false
		}
	}

	s.idx++
	cb := cloneCmd(c)
	ra := s.a.Apply(s.idx, &c)
	rb := s.b.Apply(s.idx, &cb)
	t.Logf("#%d %s -> %s", s.idx, fmtCmd(&c), fmtRes(ra))

	// Determinism: the twin gives the same answer and reaches the same state.
	require.Equal(t, resultKey(ra), resultKey(rb), "twin models disagree on the result")
	require.Equal(t, s.a.Hash(), s.b.Hash(), "twin models fed the same commands have different hashes")

	// Request-id de-duplication.
	require.Equal(t, wantDup, ra.Duplicate, "duplicate flag")
	if ra.Duplicate && orig != nil && s.now.Sub(orig.at) < DedupWindow {
		require.Equal(t, orig.code, ErrorCode(ra.Err), "a duplicate replays the first error")
		if l := orig.res.Lease; l != nil {
			// The replay rebuilds the lease from the task; only a deleted
			// task (or one whose history dropped that lease) cannot show it.
			if tk, ok := s.a.tasks[l.TaskID]; ok && tk.leaseWithEpoch(l.Epoch) != nil {
				require.NotNil(t, ra.Lease, "a duplicate lost its lease")
				require.Equal(t, l.Epoch, ra.Lease.Epoch, "a duplicate replays the first epoch")
			} else {
				require.Nil(t, ra.Lease)
			}
		}
	}
	if c.RequestID != "" && !ra.Duplicate {
		s.sent = append(s.sent, sent{cmd: cloneCmd(c), res: ra, at: s.now, code: ErrorCode(ra.Err)})
	}

	// Claim order: the most urgent pending task.
	if c.Op == OpClaim && !wantDup {
		if _, open := s.a.sessions[c.SessionID]; open {
			if wantClaim == "" {
				require.ErrorIs(t, ra.Err, ErrNoTask)
			} else {
				require.NoError(t, ra.Err)
				require.Equal(t, wantClaim, ra.Task.ID, "claim order")
			}
		}
	}
	// A command that fails, or is a duplicate, changes nothing (but the
	// request-id table): stale and foreign proposals are no-ops.
	if ra.Err != nil || ra.Duplicate {
		require.Equal(t, before, coreHash(t, s.a), "a failed or duplicate command changed the state")
	} else {
		checkFenced(t, c, pre, newKey, ra)
	}
	s.check(t, c, ra)
}

// checkFenced verifies that a command naming an epoch applied only when
// that epoch was the task's current one, in a status the op accepts, and
// (if it names a session) held by that session.
func checkFenced(t *rapid.T, c Command, pre *Lease, newKey bool, r Result) {
	var want []Status
	switch c.Op {
	case OpCheckpoint, OpWait, OpSuspect:
		want = []Status{StatusActive}
	case OpRelease:
		want = []Status{StatusActive, StatusSuspectDead}
	case OpRevive, OpExpire:
		want = []Status{StatusSuspectDead}
	case OpReclaim:
		want = []Status{StatusExpired}
	case OpRevoke:
		want = []Status{StatusActive, StatusSuspectDead, StatusExpired}
	case OpSignal:
		want = []Status{StatusPausedWaiting}
	case OpIntent:
		// A new record is fenced; a known key is answered from the journal
		// (a replay) whatever the lease.
		if newKey {
			want = []Status{StatusActive}
		}
	}
	if want == nil {
		return
	}
	require.NotNil(t, pre, "%s applied to a task without a lease", c.Op)
	if c.Epoch != 0 || (c.Op != OpRevoke && c.Op != OpSignal) {
		require.Equal(t, pre.Epoch, c.Epoch, "%s applied with a stale epoch", c.Op)
	}
	require.Contains(t, want, pre.Status, "%s applied to a %s lease", c.Op, pre.Status)
	if c.SessionID != "" && c.Op != OpRevoke {
		require.Equal(t, pre.SessionID, c.SessionID, "%s applied for a non-holder", c.Op)
	}
	if c.Op == OpReclaim {
		// The resume guard: no intent of the old epoch is still in flight.
		for _, e := range r.Task.Journal() {
			if e.Epoch == pre.Epoch {
				require.NotEqual(t, EffectIntent, e.State, "reclaim left intent %s open", e.Key)
				if e.State == EffectInDoubt {
					require.False(t, c.Time.Before(e.Deadline.Time()), "reclaim before intent %s's deadline", e.Key)
				}
			}
		}
	}
}

// expectedClaim computes, without the heap, which task a claim must take.
func (s *sim) expectedClaim() string {
	var best *Task
	for _, t := range s.a.Tasks(TaskFilter{State: TaskPending}) {
		switch {
		case best == nil, t.Priority > best.Priority,
			t.Priority == best.Priority && t.ClaimableAt.Before(best.ClaimableAt),
			t.Priority == best.Priority && t.ClaimableAt.Equal(best.ClaimableAt) && t.ID < best.ID:
			best = t
		}
	}
	if best == nil {
		return ""
	}
	return best.ID
}

// check verifies every invariant after one step; c and r are the command
// just applied and its result (zero after a snapshot step).
func (s *sim) check(t *rapid.T, c Command, r Result) {
	m := s.a
	requireIndexes(t, m)
	tasks := map[string]*Task{}
	for _, tk := range m.Tasks(TaskFilter{}) {
		tasks[tk.ID] = tk
	}

	// Grants: a new epoch is minted only by a successful, non-duplicate
	// acquire or claim, is strictly above every epoch the task id ever had
	// (I2, even across deletion and re-creation), and is never given to a
	// second holder or task.
	newGrant := ""
	if (c.Op == OpAcquire || c.Op == OpClaim) && r.Err == nil && !r.Duplicate {
		l := r.Lease
		require.NotNil(t, l)
		require.Equal(t, StatusActive, l.Status)
		require.Equal(t, c.SessionID, l.SessionID)
		if g, seen := s.grants[l.Epoch]; seen {
			// Idempotent re-acquire by the holder: the same grant again.
			require.Equal(t, OpAcquire, c.Op, "a claim returned an old epoch")
			require.Equal(t, grantRec{l.TaskID, l.SessionID}, g, "epoch %d given to two holders", l.Epoch)
		} else {
			require.Equal(t, s.idx, l.Epoch, "a new epoch is the grant's index")
			require.Greater(t, l.Epoch, s.everMax[l.TaskID], "I2: epochs of %s must strictly increase", l.TaskID)
			s.everMax[l.TaskID] = l.Epoch
			s.grants[l.Epoch] = grantRec{l.TaskID, l.SessionID}
			newGrant = l.TaskID
		}
	}

	if c.Op == OpCheckpoint && r.Err == nil && !r.Duplicate {
		s.acked[c.TaskID] = *r.Task.Checkpoint
	}
	if c.Op == OpDeleteTask && r.Err == nil && !r.Duplicate {
		require.NotContains(t, tasks, c.TaskID)
		delete(s.acked, c.TaskID)
		delete(s.final, c.TaskID)
		delete(s.lastMax, c.TaskID)
	}

	held := map[string][]string{} // session -> task ids, from the tasks themselves
	var live []string
	pending := 0
	for id, tk := range tasks {
		// I1: one live lease per task, and so at most one active one: every
		// closed lease in History is closed for good.
		active := 0
		for i, h := range tk.History() {
			require.False(t, h.Status.Live(), "task %s history[%d] is %s", id, i, h.Status)
			if i > 0 {
				require.Greater(t, h.Epoch, tk.History()[i-1].Epoch, "task %s history epochs", id)
			}
			require.Less(t, h.Epoch, tk.Lease.Epoch, "task %s history vs current", id)
		}
		if tk.Lease != nil && tk.Lease.Status == StatusActive {
			active++
		}
		require.LessOrEqual(t, active, 1)
		liveLease := tk.Lease != nil && tk.Lease.Status.Live()
		require.Equal(t, liveLease, tk.State == TaskLeased, "task %s: state %s with lease %v", id, tk.State, tk.Lease)
		if liveLease {
			held[tk.Lease.SessionID] = append(held[tk.Lease.SessionID], id)
			live = append(live, id)
		}
		if tk.Lease == nil {
			require.Zero(t, tk.MaxEpoch)
		} else {
			require.Equal(t, tk.MaxEpoch, tk.Lease.Epoch, "task %s: MaxEpoch is the current lease's", id)
			g, ok := s.grants[tk.Lease.Epoch]
			require.True(t, ok, "task %s holds epoch %d nobody was granted", id, tk.Lease.Epoch)
			require.Equal(t, grantRec{id, tk.Lease.SessionID}, g)
		}

		// MaxEpoch moves only with a new grant of this very task.
		if prev, ok := s.lastMax[id]; ok && id != newGrant {
			require.Equal(t, prev, tk.MaxEpoch, "task %s: epoch changed without a grant", id)
		}
		s.lastMax[id] = tk.MaxEpoch

		// I5: an acknowledged checkpoint is never lost or rolled back.
		if ack, ok := s.acked[id]; ok {
			require.NotNil(t, tk.Checkpoint, "task %s lost its checkpoint %d", id, ack.Seq)
			require.GreaterOrEqual(t, tk.Checkpoint.Seq, ack.Seq, "task %s checkpoint rolled back", id)
			if tk.Checkpoint.Seq == ack.Seq {
				require.Equal(t, ack, *tk.Checkpoint, "task %s checkpoint %d rewritten", id, ack.Seq)
			}
		}

		// Completed, failed and cancelled tasks stay that way, never leased.
		if f, ok := s.final[id]; ok {
			require.Equal(t, f.State, tk.State, "final task %s changed state", id)
			require.Equal(t, f.MaxEpoch, tk.MaxEpoch, "final task %s was granted again", id)
			require.False(t, liveLease)
		} else if tk.State.Final() {
			s.final[id] = tk
		}

		// A key is journaled once.
		keys := map[string]bool{}
		for _, e := range tk.Journal() {
			require.False(t, keys[e.Key], "task %s: key %s journaled twice", id, e.Key)
			keys[e.Key] = true
		}
		if tk.State == TaskPending {
			pending++
		}
	}
	// Tasks only vanish by deletion.
	for id := range s.lastMax {
		_, ok := tasks[id]
		require.True(t, ok, "task %s disappeared", id)
	}
	for id := range s.acked {
		require.Contains(t, tasks, id)
	}

	// The held-leases index agrees with the tasks.
	sort.Strings(live)
	require.Equal(t, live, leaseTasksOrNil(m.LiveLeases()), "LiveLeases")
	for _, sid := range genSessions {
		got := m.SessionLeases(sid)
		want := held[sid]
		sort.Strings(want)
		require.Equal(t, want, leaseTasksOrNil(got), "SessionLeases(%s)", sid)
		for _, l := range got {
			require.Equal(t, *tasks[l.TaskID].Lease, l)
		}
	}

	// The claim queue holds exactly the pending tasks.
	require.Len(t, m.queue.items, pending, "claim queue size")
	for i, s := range m.queue.items {
		tk := s.t
		require.Equal(t, TaskPending, tk.State)
		require.Equal(t, i, s.idx)
		require.Same(t, s, tk.q)
		require.Same(t, m.tasks[tk.ID], tk)
	}
}

func leaseTasksOrNil(ls []Lease) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.TaskID)
	}
	return out
}

func cloneCmd(c Command) Command {
	c.Payload = cloneBytes(c.Payload)
	c.Data = cloneBytes(c.Data)
	c.Result = cloneBytes(c.Result)
	if c.Effect != nil {
		c.Effect = c.Effect.clone()
	}
	return c
}

// splitmix scatters rapid's mostly small seeds over the whole range.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
