package leases

import (
	"sort"
	"sync"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

// margin is the safety margin subtracted from a validity: the larger of
// the floor and the drift bound's share of the validity.
func margin(validFor time.Duration, drift float64, floor time.Duration) time.Duration {
	m := time.Duration(float64(validFor) * drift)
	if m < floor {
		m = floor
	}
	return m
}

// heldLease is the local record of a lease the session holds. The
// identity fields never change; the checkpoint and ordinal are guarded by
// the table's lock; everything about whether it may write is in st.
type heldLease struct {
	taskID    string
	epoch     uint64
	signature string
	heartbeat time.Duration
	st        *leaseState
	ckptSeq   uint64
	ckptStep  string
	ordinal   uint64 // writes forwarded with a derived key since ckptSeq
}

// Ref is what a request needs of a lease: whom to stamp, and the
// ticket to check again before the send.
type Ref struct {
	TaskID    string
	Epoch     uint64
	Signature string
	Ticket    Ticket
}

func (l *heldLease) ref(t Ticket) Ref {
	return Ref{TaskID: l.taskID, Epoch: l.epoch, Signature: l.signature, Ticket: t}
}

type goneLease struct {
	epoch  uint64
	reason Reason
}

// goneLimit bounds the tombstones kept to name the reason of a block.
const goneLimit = 256

// leaseTable is the sidecar's set of held leases, with tombstones naming
// why a recently held one ended.
type leaseTable struct {
	drift float64
	floor time.Duration

	mu   sync.RWMutex
	held map[string]*heldLease
	gone map[string]goneLease
}

func newLeaseTable(drift float64, floor time.Duration) *leaseTable {
	return &leaseTable{drift: drift, floor: floor, held: make(map[string]*heldLease), gone: make(map[string]goneLease)}
}

// deadlineFor is the local deadline of a validity granted in reply to a
// request sent at sent (DESIGN.md 4.2).
func (t *leaseTable) deadlineFor(sent time.Time, validFor time.Duration) time.Time {
	return sent.Add(validFor - margin(validFor, t.drift, t.floor))
}

// grant records a new lease from an acquire or claim sent at sent. A
// grant of a newer epoch replaces the older record; the same grant again
// keeps the record (its ordinal, and its generation while current).
func (t *leaseTable) grant(g api.Grant, sent, now time.Time) (Ref, severed) {
	taskID := g.Lease.TaskID
	if taskID == "" {
		taskID = g.Task.ID
	}
	deadline := t.deadlineFor(sent, time.Duration(g.ValidForMs)*time.Millisecond)
	var blocked Reason
	if g.Lease.Status != "" && g.Lease.Status != lease.StatusActive {
		blocked = reasonFromStatus(g.Lease.Status)
	}
	var seq uint64
	var step string
	if cp := g.Task.Checkpoint; cp != nil {
		seq, step = cp.Seq, cp.Step
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.held[taskID]
	var cut severed
	if old != nil && old.epoch == g.Lease.Epoch {
		cut = old.st.regranted(deadline, blocked, now)
		if seq > old.ckptSeq {
			old.ckptSeq, old.ckptStep = seq, step
		}
		old.signature = g.TokenSignature
		tk, _ := old.st.check(now)
		return old.ref(tk), cut
	}
	if old != nil {
		cut = old.st.end(ReasonLost)
	}
	l := &heldLease{
		taskID: taskID, epoch: g.Lease.Epoch, signature: g.TokenSignature,
		heartbeat: time.Duration(g.HeartbeatMs) * time.Millisecond,
		st:        newLeaseState(deadline, blocked, now),
		ckptSeq:   seq, ckptStep: step,
	}
	t.held[taskID] = l
	delete(t.gone, taskID)
	tk, _ := l.st.check(now)
	return l.ref(tk), cut
}

// current returns the lease of taskID ("" = the only lease held) and
// why a write under it may not leave at now ("" = it may).
func (t *leaseTable) current(taskID string, now time.Time) (Ref, Reason) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var l *heldLease
	if taskID == "" {
		switch len(t.held) {
		case 0:
			if len(t.gone) == 1 {
				for id, g := range t.gone {
					return Ref{TaskID: id, Epoch: g.epoch}, g.reason
				}
			}
			return Ref{}, ReasonNone
		case 1:
			for _, h := range t.held {
				l = h
			}
		default:
			return Ref{}, ReasonAmbig
		}
	} else {
		l = t.held[taskID]
		if l == nil {
			if g, ok := t.gone[taskID]; ok {
				return Ref{TaskID: taskID, Epoch: g.epoch}, g.reason
			}
			return Ref{TaskID: taskID}, ReasonNone
		}
	}
	tk, why := l.st.check(now)
	return l.ref(tk), why
}

// renew applies one heartbeat reply entry for a request sent at sent. It
// reports the event the change causes, if any, what it severed and the
// lease's epoch.
func (t *leaseTable) renew(ls api.LeaseState, sent, now time.Time) (EventKind, severed, uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.held[ls.TaskID]
	if l == nil || ls.Epoch < l.epoch {
		return "", severed{}, 0 // not ours, or about an older grant
	}
	drop := func(r Reason, kind EventKind) (EventKind, severed, uint64) {
		return kind, t.dropLocked(l, r), l.epoch
	}
	if ls.Epoch > l.epoch {
		return drop(ReasonLost, EventLost) // someone else holds a newer grant
	}
	l.st.mu.Lock()
	ending := l.st.phase == phaseEnding
	l.st.mu.Unlock()
	switch ls.Signal {
	case api.SignalRevoked:
		return drop(ReasonRevoked, EventRevoked)
	case api.SignalWaiting:
		if ending {
			// The worker's own wait, seen by a heartbeat before its call
			// returned: not a loss (the call drops the lease as parked).
			return "", severed{}, l.epoch
		}
		return drop(ReasonWaiting, EventLost)
	case api.SignalLost:
		r := reasonFromStatus(ls.Status)
		if r == "" || r == ReasonSuspect {
			r = ReasonLost
		}
		return drop(r, EventLost)
	}
	switch r := reasonFromStatus(ls.Status); r {
	case "":
		kind, cut := l.st.renewed(t.deadlineFor(sent, time.Duration(ls.ValidForMs)*time.Millisecond), now)
		return kind, cut, l.epoch
	case ReasonSuspect:
		kind, cut := l.st.suspected(now)
		return kind, cut, l.epoch
	default:
		if ending {
			// The worker's own release or wait: it drops the lease when
			// the call returns.
			return "", severed{}, l.epoch
		}
		return drop(r, EventLost)
	}
}

// reasonFromStatus is the reason a lease in status s may not write (""
// for active; an empty status counts as active).
func reasonFromStatus(s lease.Status) Reason {
	switch s {
	case lease.StatusActive, "":
		return ""
	case lease.StatusSuspectDead:
		return ReasonSuspect
	case lease.StatusRevoked:
		return ReasonRevoked
	case lease.StatusPausedWaiting:
		return ReasonWaiting
	case lease.StatusReleased:
		return ReasonReleased
	default: // expired, reclaimed
		return ReasonExpired
	}
}

// dropLocked removes l, remembers why and ends its state; t.mu must be
// held.
func (t *leaseTable) dropLocked(l *heldLease, r Reason) severed {
	delete(t.held, l.taskID)
	if len(t.gone) >= goneLimit {
		for k := range t.gone { // evict an arbitrary one; they are only hints
			delete(t.gone, k)
			break
		}
	}
	t.gone[l.taskID] = goneLease{epoch: l.epoch, reason: r}
	return l.st.end(r)
}

// hold blocks new writes of a lease while the worker's release or wait
// is in flight and severs what is in flight.
func (t *leaseTable) hold(taskID string, epoch uint64, r Reason) (severed, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.held[taskID]
	if l == nil || l.epoch != epoch {
		return severed{}, false
	}
	return l.st.hold(r), true
}

// unhold undoes hold after the call failed.
func (t *leaseTable) unhold(taskID string, epoch uint64, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l := t.held[taskID]; l != nil && l.epoch == epoch {
		l.st.unhold(now)
	}
}

// drop removes the lease of taskID (when its epoch matches, or epoch is
// 0) and returns what it severed and its epoch.
func (t *leaseTable) drop(taskID string, epoch uint64, r Reason) (severed, uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.held[taskID]
	if l == nil || (epoch != 0 && l.epoch != epoch) {
		return severed{}, 0, false
	}
	return t.dropLocked(l, r), l.epoch, true
}

// ended is a lease a bulk transition took away: whom to tell and what to
// close.
type ended struct {
	taskID string
	epoch  uint64
	cut    severed
}

// dropAll removes every lease (the session is gone).
func (t *leaseTable) dropAll(r Reason) []ended {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []ended
	for _, l := range t.held {
		out = append(out, ended{taskID: l.taskID, epoch: l.epoch, cut: t.dropLocked(l, r)})
	}
	return out
}

// lapseDue lapses every current lease that may no longer write at now
// (the watchdog's sweep).
func (t *leaseTable) lapseDue(now time.Time) []ended {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var out []ended
	for _, l := range t.held {
		if cut, ok := l.st.lapse(now); ok {
			out = append(out, ended{taskID: l.taskID, epoch: l.epoch, cut: cut})
		}
	}
	return out
}

// nextDeadline returns the earliest deadline after now of a current lease.
func (t *leaseTable) nextDeadline(now time.Time) (time.Time, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var d time.Time
	for _, l := range t.held {
		if dl, ok := l.st.currentDeadline(); ok && dl.After(now) && (d.IsZero() || dl.Before(d)) {
			d = dl
		}
	}
	return d, !d.IsZero()
}

// interval is the heartbeat interval: the smallest among held leases, or
// def when none is held.
func (t *leaseTable) interval(def time.Duration) time.Duration {
	t.mu.RLock()
	defer t.mu.RUnlock()
	iv := time.Duration(0)
	for _, l := range t.held {
		if l.heartbeat > 0 && (iv == 0 || l.heartbeat < iv) {
			iv = l.heartbeat
		}
	}
	if iv == 0 {
		return def
	}
	return iv
}

// heldList names every held lease for a heartbeat request.
func (t *leaseTable) heldList() []api.HeldLease {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]api.HeldLease, 0, len(t.held))
	for _, l := range t.held {
		out = append(out, api.HeldLease{TaskID: l.taskID, Epoch: l.epoch})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TaskID < out[j].TaskID })
	return out
}

// resolve names the task a control call is for: taskID when given, else
// the only one held.
func (t *leaseTable) resolve(taskID string) (string, uint64, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if taskID != "" {
		if l := t.held[taskID]; l != nil {
			return taskID, l.epoch, nil
		}
		return taskID, 0, ErrNoLease
	}
	switch len(t.held) {
	case 0:
		return "", 0, ErrNoLease
	case 1:
		for _, l := range t.held {
			return l.taskID, l.epoch, nil
		}
	}
	return "", 0, ErrAmbiguousTask
}

// nextWrite returns the checkpoint seq and the 1-based ordinal of the next
// forwarded write of the lease (epoch must still match).
func (t *leaseTable) nextWrite(taskID string, epoch uint64) (seq, ordinal uint64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.held[taskID]
	if l == nil || l.epoch != epoch {
		return 0, 0, false
	}
	l.ordinal++
	return l.ckptSeq, l.ordinal, true
}

// checkpointed records an acknowledged checkpoint and restarts the write
// ordinal.
func (t *leaseTable) checkpointed(taskID string, epoch, seq uint64, step string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l := t.held[taskID]; l != nil && l.epoch == epoch {
		l.ckptSeq, l.ckptStep, l.ordinal = seq, step, 0
	}
}
