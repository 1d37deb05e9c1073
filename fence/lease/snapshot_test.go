package lease

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// richState builds a model with sessions, tasks in every state and lease
// status, checkpoints, history, a journal and remembered request ids.
func richState(t *testing.T) *harness {
	h := newHarness(t)
	for _, s := range []string{"s1", "s2", "s3"} {
		h.ok(openS(s))
	}
	for i, id := range []string{"pend-a", "pend-b", "pend-c"} {
		h.ok(createT(id, i%2))
		h.advance(time.Second)
	}
	e := h.grantActive("s1", "active")
	h.ok(checkpointT("s1", "active", e, 0, "one"))
	h.ok(intentT("s1", "active", e, "k-open", h.now.Add(time.Hour)))
	h.ok(intentT("s1", "active", e, "k-done", h.now.Add(time.Hour)))
	h.ok(outcomeT("active", e, "k-done", 201))
	e = h.grantActive("s2", "suspect")
	h.ok(leaderOp(OpSuspect, "suspect", e))
	e = h.grantActive("s2", "expired")
	h.expireLease("expired", e)
	e = h.grantActive("s3", "waiting")
	h.ok(waitT("s3", "waiting", e, h.now.Add(time.Minute)))
	e = h.grantActive("s3", "reclaimed")
	h.ok(checkpointT("s3", "reclaimed", e, 7, "seven"))
	h.expireLease("reclaimed", e)
	h.advance(time.Second)
	h.ok(leaderOp(OpReclaim, "reclaimed", e))
	e = h.grantActive("s3", "done")
	h.ok(releaseT("s3", "done", e, OutcomeCompleted))
	h.ok(createT("cancelled", 0))
	h.ok(cancelT("cancelled"))
	e = h.grantActive("s1", "given")
	h.ok(releaseT("s1", "given", e, OutcomeGivenBack))
	h.ok(Command{Op: OpCreateTask, TaskID: "prio", TTL: ttl, Priority: 5, RequestID: "rid-1", Payload: []byte{0, 1, 2}})
	h.ok(Command{Op: OpAcquire, SessionID: "s1", TaskID: "by-rid", Create: true, TTL: ttl, RequestID: "rid-2"})
	return h
}

func TestSnapshotRoundTrip(t *testing.T) {
	h := richState(t)
	m := h.m
	var buf bytes.Buffer
	require.NoError(t, m.WriteSnapshot(&buf))
	raw := buf.String()

	n := New()
	require.NoError(t, n.ReadSnapshot(strings.NewReader(raw)))
	require.Equal(t, m.Hash(), n.Hash())
	require.Equal(t, m.LastIndex(), n.LastIndex())
	var again bytes.Buffer
	require.NoError(t, n.WriteSnapshot(&again))
	require.Equal(t, raw, again.String(), "a restored model writes the same bytes")

	requireSameReads(t, m, n, h.now)

	// ReadSnapshot replaces whatever the model held.
	o := richState(t).m
	o.Apply(o.LastIndex()+1, &Command{Op: OpOpenSession, SessionID: "extra", WorkerID: "x", Time: h.now})
	require.NoError(t, o.ReadSnapshot(strings.NewReader(raw)))
	require.Equal(t, m.Hash(), o.Hash())

	// Both claim the same tasks in the same order, then agree on the rest.
	var order []string
	for {
		h.idx++
		c := &Command{Op: OpClaim, SessionID: "s2", Time: h.now}
		rm, rn := m.Apply(h.idx, c), n.Apply(h.idx, c)
		require.Equal(t, resultKey(rm), resultKey(rn))
		if rm.Err != nil {
			require.ErrorIs(t, rm.Err, ErrNoTask)
			break
		}
		order = append(order, rm.Task.ID)
	}
	require.Equal(t, []string{"prio", "pend-b", "pend-a", "pend-c", "given", "reclaimed"}, order) // same age: by id
	require.Equal(t, m.Hash(), n.Hash())
	requireSameReads(t, m, n, h.now)

	// The restored dedup table still answers a retried request.
	h.idx++
	c := &Command{Op: OpAcquire, SessionID: "s1", TaskID: "by-rid", Create: true, TTL: ttl, RequestID: "rid-2", Time: h.now}
	rm, rn := m.Apply(h.idx, c), n.Apply(h.idx, c)
	require.True(t, rn.Duplicate)
	require.Equal(t, resultKey(rm), resultKey(rn))

	// Closing a session after restore gives back the same leases.
	h.idx++
	c = &Command{Op: OpCloseSession, SessionID: "s2", Time: h.now}
	rm, rn = m.Apply(h.idx, c), n.Apply(h.idx, c)
	require.Equal(t, resultKey(rm), resultKey(rn))
	require.NotEmpty(t, rm.Released)
	require.Equal(t, m.Hash(), n.Hash())
}

func TestSnapshotErrors(t *testing.T) {
	m := richState(t).m
	before := m.Hash()
	require.Error(t, m.ReadSnapshot(strings.NewReader("{not json")))
	require.Error(t, m.ReadSnapshot(strings.NewReader(`{"version":99,"tasks":[]}`)))
	require.Equal(t, before, m.Hash(), "a failed restore leaves the model as it was")

	// An empty model round-trips too.
	e := New()
	require.Equal(t, e.Hash(), roundTrip(t, e).Hash())
}

// TestSnapshotThenRandomCommands restores a snapshot taken after a random
// prefix and feeds both models the same 200 random commands: they must
// agree on every result and on the Hash after each one.
func TestSnapshotThenRandomCommands(t *testing.T) {
	seeds := 20
	if raceEnabled {
		seeds = 4
	}
	for i := range seeds {
		seed := uint64(i)*7919 + 1
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, seed))
			ch := randChooser{r}
			m := New()
			now := t0
			var idx uint64
			var hist []string
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("seed %d, history:\n%s", seed, strings.Join(hist, "\n"))
				}
			})
			next := func() *Command {
				now = now.Add(pick(ch, genSteps))
				c := genCommand(ch, m, now)
				c.Time = now
				if ch.intn(4) == 0 {
					c.RequestID = fmt.Sprintf("rid-%d", ch.intn(40))
				}
				idx++
				return &c
			}
			for range 100 + r.IntN(200) {
				c := next()
				res := m.Apply(idx, c)
				hist = append(hist, fmt.Sprintf("#%d %s -> %s", idx, fmtCmd(c), fmtRes(res)))
			}
			n := roundTrip(t, m)
			hist = append(hist, "-- snapshot/restore --")
			require.Equal(t, m.Hash(), n.Hash())
			requireSameReads(t, m, n, now)
			for range 200 {
				c := next()
				cn := *c
				rm, rn := m.Apply(idx, c), n.Apply(idx, &cn)
				hist = append(hist, fmt.Sprintf("#%d %s -> %s", idx, fmtCmd(c), fmtRes(rm)))
				require.Equal(t, resultKey(rm), resultKey(rn), "#%d", idx)
				require.Equal(t, m.Hash(), n.Hash(), "#%d", idx)
			}
			requireSameReads(t, m, n, now)
		})
	}
}

// requireSameReads compares every read the API serves.
func requireSameReads(t *testing.T, m, n *Model, now time.Time) {
	t.Helper()
	require.Equal(t, m.Tasks(TaskFilter{}), n.Tasks(TaskFilter{}))
	require.Equal(t, m.Sessions(), n.Sessions())
	require.Equal(t, m.LiveLeases(), n.LiveLeases())
	for _, s := range append([]string{"s1", "s2", "s3"}, genSessions...) {
		require.Equal(t, m.SessionLeases(s), n.SessionLeases(s), "session %s", s)
	}
	for _, d := range []time.Duration{0, time.Minute, time.Hour} {
		require.Equal(t, m.WaitingDue(now.Add(d)), n.WaitingDue(now.Add(d)))
	}
	cm, sm := m.Counts()
	cn, sn := n.Counts()
	require.Equal(t, cm, cn)
	require.Equal(t, sm, sn)
	require.Equal(t, queueOrder(m), queueOrder(n), "claim queue order")
}

// queueOrder lists the claim queue in the order claims would take it.
func queueOrder(m *Model) []string {
	items := append([]*qslot(nil), m.queue.items...)
	q := claimQueue{items: items}
	sort.Slice(items, func(i, j int) bool { return q.Less(i, j) })
	out := []string{}
	for _, s := range items {
		out = append(out, s.t.ID)
	}
	return out
}

// resultKey summarises a Result for comparing two models' answers.
func resultKey(r Result) string {
	var b strings.Builder
	b.WriteString(fmtRes(r))
	var rel []string
	for _, l := range r.Released {
		rel = append(rel, fmt.Sprintf("%s/%d", l.TaskID, l.Epoch))
	}
	sort.Strings(rel) // map order: the set matters, not the order
	fmt.Fprintf(&b, " released=%v", rel)
	for _, e := range r.InDoubt {
		fmt.Fprintf(&b, " doubt=%s/%d", e.Key, e.Epoch)
	}
	if r.Task != nil && r.Task.Checkpoint != nil {
		fmt.Fprintf(&b, " cp=%d", r.Task.Checkpoint.Seq)
	}
	return b.String()
}
