package raftstore

import (
	"strings"
	"testing"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/stretchr/testify/require"
)

var histT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func checkpointCmd(task string, seq uint64, step string) (*lease.Command, lease.Result) {
	c := &lease.Command{Op: lease.OpCheckpoint, TaskID: task, Epoch: 7, Seq: seq, Step: step, Time: histT0}
	cp := &lease.Checkpoint{Seq: seq, Step: step, Epoch: 7}
	return c, lease.Result{Task: &lease.Task{ID: task, State: lease.TaskLeased, Checkpoint: cp}}
}

func TestHistoryKeepsTheLastEventsPerTask(t *testing.T) {
	h := newHistory(historyLimits{perTask: 5, perTaskBytes: 1 << 20, totalBytes: 1 << 30, feed: 100})
	for i := range uint64(12) {
		c, res := checkpointCmd("a", i+1, "s")
		h.observe(100+i, c, res)
	}
	th, ok := h.task("a")
	require.True(t, ok)
	require.Len(t, th.Events, 5)
	require.Equal(t, uint64(7), th.Dropped)
	require.Equal(t, uint64(8), th.Events[0].CheckpointSeq, "the oldest go first")
	require.Equal(t, uint64(12), th.Events[4].CheckpointSeq)
	require.Equal(t, uint64(111), th.Events[4].Index)
	require.Equal(t, histT0, th.Events[4].Time, "the leader's stamped time, not the node's clock")
	_, bytes := h.size()
	require.Equal(t, 5*eventBytes(&th.Events[0]), bytes)
}

func TestHistoryCapsATasksBytes(t *testing.T) {
	c, res := checkpointCmd("a", 1, strings.Repeat("x", 1000))
	one := eventBytes(&events(1, c, res)[0])
	h := newHistory(historyLimits{perTask: 200, perTaskBytes: 3*one + one/2, totalBytes: 1 << 30, feed: 100})
	for i := range uint64(10) {
		c, res := checkpointCmd("a", i+1, strings.Repeat("x", 1000))
		h.observe(i+1, c, res)
	}
	th, _ := h.task("a")
	require.Len(t, th.Events, 3)
	require.Equal(t, uint64(7), th.Dropped)
	// One event larger than the cap is still kept: the newest is never dropped.
	c, res = checkpointCmd("a", 11, strings.Repeat("y", 5*one))
	h.observe(11, c, res)
	th, _ = h.task("a")
	require.Len(t, th.Events, 1)
	require.Equal(t, uint64(11), th.Events[0].CheckpointSeq)
}

func TestHistoryForgetsTheTaskChangedLeastRecentlyPastTheTotal(t *testing.T) {
	c, res := checkpointCmd("t0", 1, "s")
	one := eventBytes(&events(1, c, res)[0])
	h := newHistory(historyLimits{perTask: 200, perTaskBytes: 1 << 20, totalBytes: 3 * one, feed: 100})
	for i, task := range []string{"t0", "t1", "t2", "t0", "t3"} {
		c, res := checkpointCmd(task, uint64(i+1), "s")
		h.observe(uint64(i+1), c, res)
	}
	tasks, bytes := h.size()
	require.Equal(t, 2, tasks)
	require.Equal(t, 3*one, bytes)
	for _, gone := range []string{"t1", "t2"} {
		_, ok := h.task(gone)
		require.False(t, ok, "%s changed least recently (t0 changed again)", gone)
	}
	for _, keep := range []string{"t0", "t3"} {
		_, ok := h.task(keep)
		require.True(t, ok, keep)
	}
}

func TestHistoryRecordsRefusalsAndInDoubtAndForgetsDeletedTasks(t *testing.T) {
	h := newHistory(defaultHistoryLimits)
	intent := &lease.Command{Op: lease.OpIntent, TaskID: "a", Epoch: 3, Time: histT0,
		Effect: &lease.Effect{Key: "k1", Epoch: 3, Method: "POST", URL: "http://x/y"}}
	h.observe(10, intent, lease.Result{Err: lease.ErrStaleEpoch})
	h.observe(11, &lease.Command{Op: lease.OpReclaim, TaskID: "a", Epoch: 3, Time: histT0}, lease.Result{
		Lease:   &lease.Lease{TaskID: "a", Epoch: 3, Status: lease.StatusReclaimed},
		InDoubt: []*lease.Effect{{Key: "k0", Epoch: 3, Method: "PUT", URL: "http://x/z", State: lease.EffectInDoubt}}})
	// A duplicate and a leader's refused proposal are not history.
	h.observe(12, intent, lease.Result{Duplicate: true})
	h.observe(13, &lease.Command{Op: lease.OpReclaim, TaskID: "a"}, lease.Result{Err: lease.ErrIntentsInFlight})
	th, ok := h.task("a")
	require.True(t, ok)
	require.Len(t, th.Events, 3)
	require.Equal(t, api.HistoryEvent{Seq: 1, Index: 10, Time: histT0, Kind: "intent", TaskID: "a", Epoch: 3,
		Key: "k1", Method: "POST", URL: "http://x/y", Error: "stale_epoch"}, th.Events[0])
	require.Equal(t, "reclaim", th.Events[1].Kind)
	require.Equal(t, api.EventInDoubt, th.Events[2].Kind)
	require.Equal(t, "k0", th.Events[2].Key)

	h.observe(14, &lease.Command{Op: lease.OpDeleteTask, TaskID: "a"}, lease.Result{})
	_, ok = h.task("a")
	require.False(t, ok)
	tasks, bytes := h.size()
	require.Zero(t, tasks)
	require.Zero(t, bytes)
}

func TestHistoryFeedWaitsAndResetsWhenBehind(t *testing.T) {
	h := newHistory(historyLimits{perTask: 200, perTaskBytes: 1 << 20, totalBytes: 1 << 30, feed: 4})
	feed, wake := h.since(0, true)
	require.NotNil(t, wake, "no event yet: since 0 waits for the first")
	require.Zero(t, feed.Next)
	c, res := checkpointCmd("a", 1, "s")
	h.observe(1, c, res)
	feed, _ = h.since(0, false)
	require.Len(t, feed.Events, 1, "after the wait, the first events")
	feed, wake = h.since(0, true)
	require.Nil(t, wake, "since 0 answers at once with the position")
	require.Empty(t, feed.Events)
	require.Equal(t, uint64(1), feed.Next)
	feed, wake = h.since(1, false)
	require.NotNil(t, wake, "nothing new: wait")
	c, res = checkpointCmd("a", 2, "s")
	h.observe(2, c, res)
	select {
	case <-wake:
	default:
		t.Fatal("an append wakes the waiter")
	}
	feed, _ = h.since(1, false)
	require.Len(t, feed.Events, 1)
	require.Equal(t, uint64(2), feed.Next)
	require.False(t, feed.Reset)
	for i := range uint64(6) {
		c, res := checkpointCmd("a", 3+i, "s")
		h.observe(3+i, c, res)
	}
	feed, _ = h.since(2, false)
	require.True(t, feed.Reset, "events 3 and 4 fell out of the ring")
	require.Len(t, feed.Events, 4)
	require.Equal(t, uint64(5), feed.Events[0].Seq)
	require.Equal(t, uint64(8), feed.Next)
	feed, _ = h.since(99, false)
	require.True(t, feed.Reset, "a position this node never had")
	require.NotEmpty(t, feed.Feed)
	other, _ := newHistory(defaultHistoryLimits).since(0, true)
	require.NotEqual(t, feed.Feed, other.Feed, "each node's feed has its own name")
	require.Equal(t, uint64(8), feed.Next)
}

func TestStoreServesTheHistoryOfAppliedCommands(t *testing.T) {
	c := newTestCluster(t, 1)
	s := c.waitForLeader()
	ctx := ctxT(t)
	sid := openSession(t, s, "w1")
	feed, err := s.WatchEvents(ctx, 0, time.Millisecond)
	require.NoError(t, err)
	g, err := s.Acquire(ctx, "r2", "hist-1", api.AcquireRequest{SessionID: sid, Create: true})
	require.NoError(t, err)
	next, err := s.WatchEvents(ctx, feed.Next, time.Second)
	require.NoError(t, err)
	require.NotEmpty(t, next.Events)
	require.Equal(t, "hist-1", next.Events[len(next.Events)-1].TaskID)
	th, err := s.TaskHistory(ctx, "hist-1")
	require.NoError(t, err)
	require.Equal(t, g.Lease.Epoch, th.Events[len(th.Events)-1].Epoch)
	_, err = s.TaskHistory(ctx, "nope")
	require.ErrorIs(t, err, lease.ErrTaskNotFound)
}

func TestEveryMemberDerivesTheSameHistory(t *testing.T) {
	c := newTestCluster(t, 3)
	s := c.waitForLeader()
	sid := openSession(t, s, "w1")
	g, err := s.Acquire(ctxT(t), "r-acq", "everywhere", api.AcquireRequest{SessionID: sid, Create: true})
	require.NoError(t, err)
	for _, n := range c.snapshot() {
		require.Eventually(t, func() bool {
			th, err := n.TaskHistory(ctxT(t), "everywhere")
			return err == nil && len(th.Events) == 1 && th.Events[0].Epoch == g.Lease.Epoch && th.Events[0].Index == g.Lease.Epoch
		}, 5*time.Second, 10*time.Millisecond, "member %s", n.NodeID())
	}
}

// After a restart a member has the events of the entries it replays (here
// all of them: no snapshot yet), with their stamped times; DESIGN.md 15
// says what a snapshot leaves out.
func TestHistoryAfterARestartIsTheReplayedLog(t *testing.T) {
	c := newTestCluster(t, 1)
	s := c.waitForLeader()
	sid := openSession(t, s, "w1")
	_, err := s.Acquire(ctxT(t), "r-acq", "restarted", api.AcquireRequest{SessionID: sid, Create: true})
	require.NoError(t, err)
	before, err := s.TaskHistory(ctxT(t), "restarted")
	require.NoError(t, err)
	c.stop(0)
	c.start(0)
	s = c.waitForLeader()
	require.Eventually(t, func() bool {
		after, err := s.TaskHistory(ctxT(t), "restarted")
		if err != nil || len(after.Events) != len(before.Events) {
			return false
		}
		for i := range after.Events {
			a, b := after.Events[i], before.Events[i]
			if a.Index != b.Index || !a.Time.Equal(b.Time) || a.Kind != b.Kind {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond)
}
