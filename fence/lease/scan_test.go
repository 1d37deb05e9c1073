package lease

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// collect copies what a scan yields, ordered by task id.
func collect(seq func(func(*Lease) bool)) []Lease {
	var out []Lease
	for l := range seq {
		out = append(out, *l)
	}
	slices.SortFunc(out, func(a, b Lease) int { return strings.Compare(a.TaskID, b.TaskID) })
	return out
}

func TestScansMatchCopies(t *testing.T) {
	h := newHarness(t)
	for _, s := range []string{"s1", "s2"} {
		h.ok(Command{Op: OpOpenSession, SessionID: s, WorkerID: "w-" + s})
	}
	for i, task := range []string{"a", "b", "c", "d"} {
		h.ok(Command{Op: OpAcquire, TaskID: task, SessionID: []string{"s1", "s2"}[i%2], Create: true, TTL: ttl})
	}
	b := h.task("b").Lease
	h.ok(Command{Op: OpRelease, TaskID: "b", SessionID: "s2", Epoch: b.Epoch, Outcome: "given_back"})
	c := h.task("c").Lease
	h.ok(Command{Op: OpSuspect, TaskID: "c", Epoch: c.Epoch})

	require.Equal(t, h.m.LiveLeases(), collect(h.m.LiveScan()))
	for _, s := range []string{"s1", "s2", "nobody"} {
		require.Equal(t, h.m.SessionLeases(s), append([]Lease{}, collect(h.m.SessionScan(s))...), s)
	}
	var ids []string
	for id := range h.m.SessionIDs() {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	require.Equal(t, []string{"s1", "s2"}, ids)
	require.True(t, h.m.HasSession("s1"))
	require.False(t, h.m.HasSession("nobody"))

	require.True(t, h.m.IsLive("c", c.Epoch), "suspect still blocks a grant")
	require.False(t, h.m.IsLive("b", b.Epoch), "released")
	require.False(t, h.m.IsLive("a", c.Epoch), "wrong epoch")
	require.False(t, h.m.IsLive("zz", 1))

	// Stopping early stops the scan.
	n := 0
	for range h.m.LiveScan() {
		n++
		break
	}
	require.Equal(t, 1, n)
}

func TestIntentsUntil(t *testing.T) {
	h := newHarness(t)
	h.ok(Command{Op: OpOpenSession, SessionID: "s1", WorkerID: "w"})
	h.ok(Command{Op: OpAcquire, TaskID: "a", SessionID: "s1", Create: true, TTL: ttl})
	ep := h.task("a").Lease.Epoch
	_, ok := h.m.IntentsUntil("a", ep)
	require.False(t, ok, "no intents yet")
	late := h.now.Add(time.Minute)
	h.ok(Command{Op: OpIntent, TaskID: "a", SessionID: "s1", Epoch: ep, Effect: &Effect{Key: "k1", Method: "POST", Deadline: StampOf(h.now.Add(time.Second))}})
	h.ok(Command{Op: OpIntent, TaskID: "a", SessionID: "s1", Epoch: ep, Effect: &Effect{Key: "k2", Method: "POST", Deadline: StampOf(late)}})
	until, ok := h.m.IntentsUntil("a", ep)
	require.True(t, ok)
	require.Equal(t, late, until)
	_, ok = h.m.IntentsUntil("a", ep+1)
	require.False(t, ok, "another epoch's intents do not count")
	_, ok = h.m.IntentsUntil("missing", ep)
	require.False(t, ok)
}
