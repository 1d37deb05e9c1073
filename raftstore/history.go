package raftstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

// Bounds of the recent history every node keeps (README "Console"). The
// history is derived from the commands this node applies, like the session
// watch, so it needs no raft entry of its own and no leader.
const (
	// HistoryEventsPerTask is how many events are kept per task; older
	// ones are dropped first.
	HistoryEventsPerTask = 200
	// HistoryBytesPerTask caps one task's events (their estimated size).
	HistoryBytesPerTask = 64 << 10
	// HistoryTotalBytes caps every task's events together; past it the
	// history of the task changed least recently is forgotten first.
	HistoryTotalBytes = 64 << 20
	// FeedEvents is how many recent events across all tasks the event feed
	// (GET /v1/events) keeps for watchers that fell behind.
	FeedEvents = 4096
	// MaxFeedPage bounds the events of one feed answer.
	MaxFeedPage = 1000
)

// historyLimits are the bounds above; tests shrink them.
type historyLimits struct {
	perTask, perTaskBytes, totalBytes, feed int
}

var defaultHistoryLimits = historyLimits{HistoryEventsPerTask, HistoryBytesPerTask, HistoryTotalBytes, FeedEvents}

// history is the node's recent history: per task, and as one feed. Events
// are kept in their stored form (history_compact.go).
type history struct {
	mu    sync.Mutex
	lim   historyLimits
	tasks map[string]*taskLog
	// oldest and newest end the list of task logs through their prev and
	// next, least recently changed first: linked through the logs
	// themselves, a task costs no list element.
	oldest, newest *taskLog
	bytes          int
	// feed is a ring of the last lim.feed events; seq numbers the newest.
	feed []feedEvent
	head int // index of the oldest event in feed
	seq  uint64
	wake chan struct{} // closed and replaced on every append
	// id names this feed (api.EventFeed.Feed): seq numbers mean nothing
	// on another node or after a restart.
	id string
	// packBuf is pack's scratch space, reused across events.
	packBuf []byte
}

// taskLog is one task's events, oldest first. There is one per task in
// the history, so it is kept to 64 bytes: its byte count is bounded by
// HistoryBytesPerTask plus one event, and its count of dropped events
// stops at the largest uint32.
type taskLog struct {
	id         string
	events     []storedEvent
	bytes      int32
	dropped    uint32
	prev, next *taskLog // in history's list
}

func newHistory(lim historyLimits) *history {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return &history{lim: lim, tasks: map[string]*taskLog{}, wake: make(chan struct{}), id: hex.EncodeToString(b[:])}
}

// refusalsKept are the ops whose refusals are history: a worker's or an
// operator's request the cluster said no to (an old owner's journaled
// write refused as stale, an acquire of a task someone else holds). The
// leader's own retried proposals (a reclaim waiting out an intent) are not.
var refusalsKept = map[lease.Op]bool{
	lease.OpAcquire: true, lease.OpCheckpoint: true, lease.OpWait: true, lease.OpRelease: true,
	lease.OpIntent: true, lease.OpOutcome: true, lease.OpRevoke: true, lease.OpCancel: true, lease.OpSignal: true,
}

// events derives the history events of one applied command.
func events(index uint64, c *lease.Command, res lease.Result) []api.HistoryEvent {
	if res.Duplicate {
		return nil
	}
	e := api.HistoryEvent{Index: index, Time: c.Time, Kind: c.Op.String(), TaskID: c.TaskID,
		Epoch: c.Epoch, SessionID: c.SessionID, WorkerID: c.WorkerID, Reason: c.Reason, By: c.Owner}
	if res.Err != nil {
		if !refusalsKept[c.Op] || c.TaskID == "" {
			return nil
		}
		e.Error = lease.ErrorCode(res.Err)
		addEffect(&e, c.Effect)
		e.Step, e.CheckpointSeq = c.Step, c.Seq
		return []api.HistoryEvent{e}
	}
	if t := res.Task; t != nil {
		e.TaskID, e.State = t.ID, t.State
	}
	if l := res.Lease; l != nil {
		e.TaskID, e.Epoch, e.Status, e.WorkerID, e.SessionID = l.TaskID, l.Epoch, l.Status, l.WorkerID, l.SessionID
		if e.Reason == "" {
			e.Reason = l.Reason
		}
	}
	switch c.Op {
	case lease.OpCheckpoint:
		if cp := resTaskCheckpoint(res); cp != nil {
			e.CheckpointSeq, e.Step = cp.Seq, cp.Step
		}
	case lease.OpIntent, lease.OpOutcome:
		addEffect(&e, c.Effect)
		addEffect(&e, res.Effect)
	case lease.OpRelease:
		if e.Reason == "" {
			e.Reason = string(c.Outcome)
		}
	case lease.OpCloseSession:
		out := []api.HistoryEvent{e}
		for _, l := range res.Released {
			out = append(out, api.HistoryEvent{Index: index, Time: c.Time, Kind: api.EventSessionRelease, TaskID: l.TaskID,
				Epoch: l.Epoch, WorkerID: l.WorkerID, SessionID: l.SessionID, Status: l.Status, Reason: l.Reason, By: c.Owner})
		}
		return out
	case lease.OpReclaim:
		out := []api.HistoryEvent{e}
		for _, ef := range res.InDoubt {
			d := api.HistoryEvent{Index: index, Time: c.Time, Kind: api.EventInDoubt, TaskID: e.TaskID}
			addEffect(&d, ef)
			out = append(out, d)
		}
		return out
	}
	return []api.HistoryEvent{e}
}

// resTaskCheckpoint is the checkpoint a command left on its task.
func resTaskCheckpoint(res lease.Result) *lease.Checkpoint {
	if res.Task == nil {
		return nil
	}
	return res.Task.Checkpoint
}

// addEffect copies a journal record's identifying fields, never its body.
func addEffect(e *api.HistoryEvent, ef *lease.Effect) {
	if ef == nil {
		return
	}
	if ef.Epoch != 0 {
		e.Epoch = ef.Epoch
	}
	e.Key, e.EffectState = ef.Key, ef.State
	if ef.Method != "" {
		e.Method, e.URL = ef.Method, ef.URL
	}
	if ef.Status != 0 {
		e.HTTPStatus = ef.Status
	}
}

// eventBytes estimates what an event holds in memory.
func eventBytes(e *api.HistoryEvent) int {
	return 160 + len(e.Kind) + len(e.TaskID) + len(e.WorkerID) + len(e.SessionID) + len(e.Reason) + len(e.By) +
		len(e.Step) + len(e.Key) + len(e.Method) + len(e.URL) + len(e.Error) + len(e.TraceID)
}

// observe records the events of one applied command and wakes watchers.
func (h *history) observe(index uint64, c *lease.Command, res lease.Result) {
	evs := events(index, c, res)
	if len(evs) == 0 {
		return
	}
	h.add(evs, c.Op == lease.OpDeleteTask && res.Err == nil)
}

// add records events (numbering them) and wakes watchers; forget drops
// the task's history afterwards (its deletion).
func (h *history) add(evs []api.HistoryEvent, forget bool) {
	h.mu.Lock()
	for i := range evs {
		h.seq++
		evs[i].Seq = h.seq
		s := pack(&evs[i], &h.packBuf)
		h.appendFeed(feedEvent{s, evs[i].TaskID})
		if evs[i].TaskID != "" {
			h.appendTask(evs[i].TaskID, s, eventBytes(&evs[i]))
		}
	}
	if forget {
		h.forget(evs[0].TaskID)
	}
	close(h.wake)
	h.wake = make(chan struct{})
	h.mu.Unlock()
}

func (h *history) appendFeed(e feedEvent) {
	if len(h.feed) < h.lim.feed {
		h.feed = append(h.feed, e)
		return
	}
	h.feed[h.head] = e
	h.head = (h.head + 1) % len(h.feed)
}

// appendTask adds a stored event of task id, of n estimated bytes.
func (h *history) appendTask(id string, e storedEvent, n int) {
	tl := h.tasks[id]
	if tl == nil {
		tl = &taskLog{id: id}
		h.tasks[id] = tl
	} else {
		h.unlink(tl)
	}
	h.pushNewest(tl)
	tl.events = append(tl.events, e)
	tl.bytes += int32(n)
	h.bytes += n
	for len(tl.events) > 1 && (len(tl.events) > h.lim.perTask || int(tl.bytes) > h.lim.perTaskBytes) {
		old := unpack(&tl.events[0], tl.id)
		n := eventBytes(&old)
		tl.events[0] = storedEvent{}
		tl.events = tl.events[1:]
		tl.bytes -= int32(n)
		h.bytes -= n
		if tl.dropped < math.MaxUint32 {
			tl.dropped++
		}
	}
	// Forget whole histories, least recently changed first, but never the
	// one just written.
	for h.bytes > h.lim.totalBytes && h.oldest != tl {
		h.forget(h.oldest.id)
	}
}

func (h *history) forget(id string) {
	tl := h.tasks[id]
	if tl == nil {
		return
	}
	h.bytes -= int(tl.bytes)
	h.unlink(tl)
	delete(h.tasks, id)
}

// pushNewest puts an unlinked log at the newest end of the list.
func (h *history) pushNewest(tl *taskLog) {
	tl.prev, tl.next = h.newest, nil
	if h.newest != nil {
		h.newest.next = tl
	} else {
		h.oldest = tl
	}
	h.newest = tl
}

// unlink takes a log out of the list.
func (h *history) unlink(tl *taskLog) {
	if tl.prev != nil {
		tl.prev.next = tl.next
	} else {
		h.oldest = tl.next
	}
	if tl.next != nil {
		tl.next.prev = tl.prev
	} else {
		h.newest = tl.prev
	}
	tl.prev, tl.next = nil, nil
}

// task returns a copy of a task's events, and whether it has any.
func (h *history) task(id string) (api.TaskHistory, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	tl := h.tasks[id]
	if tl == nil {
		return api.TaskHistory{TaskID: id, Events: []api.HistoryEvent{}}, false
	}
	evs := make([]api.HistoryEvent, len(tl.events))
	for i := range tl.events {
		evs[i] = unpack(&tl.events[i], tl.id)
	}
	return api.TaskHistory{TaskID: id, Events: evs, Dropped: uint64(tl.dropped)}, true
}

// since returns the feed's events after seq (at most MaxFeedPage), or,
// with none yet, a channel closed at the next append. fromNow (a watch's
// first look, since 0) answers the current position instead, once there
// is one.
func (h *history) since(seq uint64, fromNow bool) (api.EventFeed, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := api.EventFeed{Events: []api.HistoryEvent{}, Next: h.seq, Feed: h.id}
	if fromNow && h.seq > 0 {
		return out, nil // a new watcher starts from now
	}
	if seq > h.seq {
		out.Reset = true // another node's or a restarted node's numbers
		return out, nil
	}
	oldest := h.seq - uint64(len(h.feed)) + 1
	if seq+1 < oldest {
		out.Reset, seq = true, oldest-1
	}
	if seq == h.seq {
		return out, h.wake
	}
	for s := seq + 1; s <= h.seq && len(out.Events) < MaxFeedPage; s++ {
		fe := &h.feed[(h.head+int(s-oldest))%len(h.feed)]
		out.Events = append(out.Events, unpack(&fe.storedEvent, fe.taskID))
	}
	out.Next = out.Events[len(out.Events)-1].Seq
	return out, nil
}

// size returns the tracked tasks and their bytes (tests).
func (h *history) size() (tasks, bytes int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.tasks), h.bytes
}

// TaskHistory returns the recent events of one task from this node's own
// history, oldest first (README "Console" states the bound). A task with
// no history and no record is ErrTaskNotFound.
func (s *Store) TaskHistory(_ context.Context, taskID string) (api.TaskHistory, error) {
	if err := s.cmds.checkTaskID(taskID); err != nil {
		return api.TaskHistory{}, err
	}
	out, ok := s.fsm.history.task(taskID)
	if !ok {
		var exists bool
		s.fsm.read(func(m *lease.Model) { _, exists = m.Task(taskID) })
		if !exists {
			return out, fmt.Errorf("raftstore: task %q: %w", taskID, lease.ErrTaskNotFound)
		}
	}
	return out, nil
}

// WatchEvents waits up to d (capped at MaxWatchWait) for events after
// since on this node and returns them. Since 0 starts a watch from now: it
// answers at once with the current position, or, on a node that has
// applied no event yet, waits for the first ones. It answers from this
// node's own history, leader or not.
func (s *Store) WatchEvents(ctx context.Context, since uint64, d time.Duration) (api.EventFeed, error) {
	if d <= 0 || d > MaxWatchWait {
		d = MaxWatchWait
	}
	t := time.NewTimer(d)
	defer t.Stop()
	for fromNow := since == 0; ; fromNow = false {
		out, wake := s.fsm.history.since(since, fromNow)
		if wake == nil {
			return out, nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return out, nil
		case <-t.C:
			return out, nil
		}
	}
}
