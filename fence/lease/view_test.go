package lease

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// legacySnapshot encodes m the way WriteSnapshot did before snapshots were
// streamed from a View: one snapshot value through json.Encoder.
func legacySnapshot(t *testing.T, m *Model) []byte {
	t.Helper()
	s := snapshot{Version: snapshotVersion, LastIndex: m.lastIndex, Sessions: m.Sessions(),
		Dedup: map[string]dedupEntry{}, DedupOrder: []dedupRef{}}
	for _, tk := range m.tasks {
		s.Tasks = append(s.Tasks, tk)
	}
	sort.Slice(s.Tasks, func(i, j int) bool { return s.Tasks[i].ID < s.Tasks[j].ID })
	for i := range m.dedup.recs {
		r := &m.dedup.recs[i]
		s.Dedup[r.id] = r.entry()
		s.DedupOrder = append(s.DedupOrder, dedupRef{ID: r.id, At: r.at})
	}
	var buf bytes.Buffer
	require.NoError(t, json.NewEncoder(&buf).Encode(&s))
	return buf.Bytes()
}

// TestSnapshotFormatUnchanged: the streamed snapshot is byte for byte what
// the single-value encoder wrote, and a snapshot written by the version
// before it (testdata/snapshot-v1.json, richState's) restores to the same
// state and writes the same bytes back.
func TestSnapshotFormatUnchanged(t *testing.T) {
	h := richState(t)
	var buf bytes.Buffer
	require.NoError(t, h.m.WriteSnapshot(&buf))
	require.Equal(t, string(legacySnapshot(t, h.m)), buf.String())

	old, err := os.ReadFile("testdata/snapshot-v1.json")
	require.NoError(t, err)
	n := New()
	require.NoError(t, n.ReadSnapshot(bytes.NewReader(old)))
	// The fixture predates request fingerprints (dedupEntry.FP); apart
	// from them the states are equal.
	for i := range h.m.dedup.recs {
		h.m.dedup.recs[i].fp = 0
	}
	require.Equal(t, h.m.Hash(), n.Hash())
	requireSameReads(t, h.m, n, h.now)
	var again bytes.Buffer
	require.NoError(t, n.WriteSnapshot(&again))
	require.Equal(t, string(old), again.String())

	// The restored request ids still answer retries.
	h.idx++
	c := &Command{Op: OpAcquire, SessionID: "s1", TaskID: "by-rid", Create: true, TTL: ttl, RequestID: "rid-2", Time: h.now}
	rm, rn := h.m.Apply(h.idx, c), n.Apply(h.idx, c)
	require.True(t, rn.Duplicate)
	require.Equal(t, resultKey(rm), resultKey(rn))
}

// TestSnapshotNullsAndUnknownKeys: null lists and keys a later version
// might add do not stop a restore.
func TestSnapshotNullsAndUnknownKeys(t *testing.T) {
	m := New()
	require.NoError(t, m.ReadSnapshot(bytes.NewReader([]byte(
		`{"version":1,"lastIndex":7,"tasks":null,"sessions":null,"dedup":null,"dedupOrder":null,"future":{"x":[1]}}`))))
	require.Equal(t, uint64(7), m.LastIndex())
	require.Equal(t, New().Hash(), roundTrip(t, New()).Hash())
}

// TestViewIsolatedFromLaterApplies takes a view of a random state, then
// writes it out while random commands go on changing the model (under
// -race: the writer and Apply share no memory they both write). The view
// must write the state it was taken at, and the model must be the model a
// never-viewed replica reaches.
func TestViewIsolatedFromLaterApplies(t *testing.T) {
	seeds := 10
	if raceEnabled {
		seeds = 3
	}
	for i := range seeds {
		seed := uint64(i)*104729 + 3
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, seed))
			ch := randChooser{r}
			m, twin := New(), New()
			now := t0
			var idx uint64
			step := func() {
				now = now.Add(pick(ch, genSteps))
				c := genCommand(ch, m, now)
				c.Time = now
				if ch.intn(3) == 0 {
					c.RequestID = fmt.Sprintf("rid-%d", ch.intn(60))
				}
				idx++
				c2 := c
				require.Equal(t, resultKey(twin.Apply(idx, &c2)), resultKey(m.Apply(idx, &c)), "#%d", idx)
			}
			for range 150 + r.IntN(150) {
				step()
			}
			var want bytes.Buffer
			require.NoError(t, twin.WriteSnapshot(&want))

			v := m.View()
			done := make(chan []byte)
			go func() {
				var got bytes.Buffer
				_, err := v.WriteTo(&got)
				if err != nil {
					got.Reset()
				}
				done <- got.Bytes()
			}()
			for range 200 {
				step()
			}
			got := <-done
			v.Release()
			require.Equal(t, want.String(), string(got), "the view writes the state it was taken at")
			require.Equal(t, twin.Hash(), m.Hash(), "the viewed model changed exactly as its twin")
			requireSameReads(t, twin, m, now)
			requireIndexes(t, m)
		})
	}
}

// requireIndexes checks the derived claim queue and held slots against
// the tasks.
func requireIndexes(t interface {
	require.TestingT
	Helper()
}, m *Model) {
	t.Helper()
	pending := 0
	for _, tk := range m.tasks {
		if tk.State == TaskPending {
			pending++
			require.NotNil(t, tk.q, "pending task %s is queued", tk.ID)
		} else {
			require.Nil(t, tk.q, "task %s (%s) is not queued", tk.ID, tk.State)
		}
	}
	require.Len(t, m.queue.items, pending)
	for i, s := range m.queue.items {
		require.Equal(t, i, s.idx)
		require.Same(t, m.tasks[s.t.ID], s.t)
	}
	// The held slots point at the model's current copy of each task whose
	// lease is live, and at nothing else.
	live := 0
	for _, tk := range m.tasks {
		if tk.Lease == nil || !tk.Lease.Status.Live() {
			require.Zero(t, tk.held, "task %s's lease is not live: not held", tk.ID)
			continue
		}
		live++
		set := m.held[tk.Lease.SessionID]
		require.Positive(t, tk.held, "task %s's live lease is held", tk.ID)
		require.LessOrEqual(t, tk.held, len(set))
		require.Same(t, tk, set[tk.held-1], "task %s's slot holds its current copy", tk.ID)
	}
	n := 0
	for sid, set := range m.held {
		require.NotEmpty(t, set, "session %s has no held tasks and no entry", sid)
		n += len(set)
	}
	require.Equal(t, live, n, "every held slot is a live lease")
}

// TestViewCopiesOnlyWhileOpen: a task is copied before its first change
// under an open view, changed in place once more, and changed in place
// again after the view is released.
func TestViewCopiesOnlyWhileOpen(t *testing.T) {
	h := newHarness(t)
	e := h.grantActive("s1", "a")
	orig := h.m.tasks["a"]
	v := h.m.View()
	h.ok(checkpointT("s1", "a", e, 0, "one"))
	copied := h.m.tasks["a"]
	require.NotSame(t, orig, copied, "a task the view holds is copied before it changes")
	require.Nil(t, orig.Checkpoint, "the view's task is unchanged")
	h.ok(checkpointT("s1", "a", e, 0, "two"))
	require.Same(t, copied, h.m.tasks["a"], "the copy is the model's own: changed in place")
	v.Release()
	v.Release()
	h.ok(checkpointT("s1", "a", e, 0, "three"))
	require.Same(t, copied, h.m.tasks["a"], "no view open: changed in place")
}

// TestDedupRecordsStayPutForView: pruning request ids while a view is
// open leaves the records it reads as they were.
func TestDedupRecordsStayPutForView(t *testing.T) {
	h := newHarness(t)
	h.ok(Command{Op: OpOpenSession, SessionID: "s1", WorkerID: "w", RequestID: "r1"})
	v := h.m.View()
	var want bytes.Buffer
	now := h.m.View()
	_, err := now.WriteTo(&want)
	require.NoError(t, err)
	now.Release()
	h.advance(DedupWindow + time.Second)
	h.ok(Command{Op: OpOpenSession, SessionID: "s2", WorkerID: "w", RequestID: "r2"})
	require.Equal(t, 1, h.m.dedup.len(), "r1 was pruned")
	var got bytes.Buffer
	_, err = v.WriteTo(&got)
	require.NoError(t, err)
	require.Equal(t, want.String(), got.String())
}
