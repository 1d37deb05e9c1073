package leases

import (
	"sort"
	"time"
)

// taskIDs returns the ids of the held leases, sorted.
func (t *leaseTable) taskIDs() []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]string, 0, len(t.held))
	for id := range t.held {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// View is the local view of one lease, as GET /v1/lease returns it.
type View struct {
	TaskID         string `json:"taskId"`
	Epoch          uint64 `json:"epoch"`
	Status         string `json:"status"` // "current" or the reason it is not
	Current        bool   `json:"current"`
	RemainingMs    int64  `json:"remainingMs"`
	HeartbeatMs    int64  `json:"heartbeatMs"`
	CheckpointSeq  uint64 `json:"checkpointSeq"`
	CheckpointStep string `json:"checkpointStep,omitempty"`
	WritesSinceCkp uint64 `json:"writesSinceCheckpoint"`
}

// views lists every held lease as of now, sorted by task id.
func (t *leaseTable) views(now time.Time) []View {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]View, 0, len(t.held))
	for _, l := range t.held {
		v := View{
			TaskID: l.taskID, Epoch: l.epoch, HeartbeatMs: l.heartbeat.Milliseconds(),
			CheckpointSeq: l.ckptSeq, CheckpointStep: l.ckptStep, WritesSinceCkp: l.ordinal,
		}
		var rem time.Duration
		v.Status, rem = l.st.view(now)
		if v.Status == "current" {
			v.Current, v.RemainingMs = true, rem.Milliseconds()
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TaskID < out[j].TaskID })
	return out
}

// minRemaining is the smallest remaining validity among current leases
// (0 when none is current), for the aggregate gauge.
func (t *leaseTable) minRemaining(now time.Time) time.Duration {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var m time.Duration = -1
	for _, l := range t.held {
		dl, ok := l.st.currentDeadline()
		if !ok {
			continue
		}
		r := max(dl.Sub(now), 0)
		if m < 0 || r < m {
			m = r
		}
	}
	return max(m, 0)
}

// count returns the number of held leases.
func (t *leaseTable) count() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.held)
}

// TaskIDs returns the ids of the held leases, sorted.
func (k *Keeper) TaskIDs() []string { return k.table.taskIDs() }

// Resolve names the task a control call is for: taskID when given, else
// the only one held; with the lease's epoch. ErrNoLease or
// ErrAmbiguousTask otherwise.
func (k *Keeper) Resolve(taskID string) (string, uint64, error) { return k.table.resolve(taskID) }

// NextWrite returns the checkpoint seq and the 1-based ordinal of the next
// forwarded write of the lease; false when epoch is no longer held.
func (k *Keeper) NextWrite(taskID string, epoch uint64) (seq, ordinal uint64, ok bool) {
	return k.table.nextWrite(taskID, epoch)
}

// Checkpointed records a checkpoint the cluster acknowledged and restarts
// the lease's write ordinal.
func (k *Keeper) Checkpointed(taskID string, epoch, seq uint64, step string) {
	k.table.checkpointed(taskID, epoch, seq, step)
}

// knows reports whether the table holds a lease on taskID, or remembers
// one that ended (a tombstone): the Router routes such a task to this
// table's keeper.
func (t *leaseTable) knows(taskID string) (held, gone bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	_, held = t.held[taskID]
	_, gone = t.gone[taskID]
	return held, gone
}
