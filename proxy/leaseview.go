package proxy

import (
	"io"
	"sort"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

// reason says why a task has no current lease; it picks the problem type
// of a blocked write.
type reason string

const (
	reasonNone     reason = "none"     // never held, or unknown task
	reasonExpired  reason = "expired"  // local deadline passed, or the cluster expired it
	reasonSuspect  reason = "suspect"  // the cluster reports suspect_dead
	reasonRevoked  reason = "revoked"  // revoked by an operator or a conflict
	reasonWaiting  reason = "waiting"  // parked by a wait
	reasonReleased reason = "released" // completed, failed or given back
	reasonLost     reason = "lost"     // superseded, or the session died
	reasonAmbig    reason = "ambiguous"
)

// problem returns the problem code and title of a blocked request.
func (r reason) problem() (code, title string) {
	switch r {
	case reasonExpired:
		return CodeLeaseExpired, "lease expired: write blocked"
	case reasonSuspect:
		return CodeLeaseSuspect, "lease suspect: write blocked until the heartbeat gets through"
	case reasonRevoked:
		return CodeLeaseRevoked, "lease revoked: write blocked"
	case reasonWaiting:
		return CodeLeaseWaiting, "task is waiting: write blocked"
	case reasonAmbig:
		return CodeAmbiguousTask, "several leases held: name the task"
	default:
		return CodeNoLease, "no lease for this task: write blocked"
	}
}

// margin is the safety margin subtracted from a validity: the larger of
// the floor and the drift bound's share of the validity.
func margin(validFor time.Duration, drift float64, floor time.Duration) time.Duration {
	m := time.Duration(float64(validFor) * drift)
	if m < floor {
		m = floor
	}
	return m
}

// generation is one uninterrupted period during which a lease is current.
// Everything that must stop when the lease stops being current (pooled
// upstream connections carrying writes, CONNECT tunnels) registers here;
// cut closes it all at once. A revived lease gets a fresh generation.
type generation struct {
	mu       sync.Mutex
	cut      bool
	deadline time.Time          // the lease's local deadline, kept in step with renewals
	closers  map[io.Closer]bool // value: is a tunnel
	client   *fasthttp.Client   // write client whose conns register here
}

func (g *generation) setDeadline(d time.Time) {
	g.mu.Lock()
	g.deadline = d
	g.mu.Unlock()
}

// open reports whether a write may still leave under this generation at
// now: not cut and before the deadline. Upstream connections of writes
// check it before every write to the socket, so not one byte of a write
// leaves at or after the local deadline, whatever the scheduler did
// between the lease check and the send.
func (g *generation) open(now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.cut && now.Before(g.deadline)
}

func newGeneration() *generation { return &generation{closers: make(map[io.Closer]bool)} }

// track registers c; it reports false (and c must be closed by the
// caller) when the generation is already cut.
func (g *generation) track(c io.Closer, tunnel bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cut {
		return false
	}
	g.closers[c] = tunnel
	return true
}

func (g *generation) untrack(c io.Closer) {
	g.mu.Lock()
	delete(g.closers, c)
	g.mu.Unlock()
}

func (g *generation) isCut() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cut
}

// cutAll closes every registered connection and tunnel and returns how
// many tunnels it closed.
func (g *generation) cutAll() (tunnels int) {
	g.mu.Lock()
	if g.cut {
		g.mu.Unlock()
		return 0
	}
	g.cut = true
	closers := g.closers
	g.closers = nil
	client := g.client
	g.mu.Unlock()
	for c, tunnel := range closers {
		_ = c.Close()
		if tunnel {
			tunnels++
		}
	}
	if client != nil {
		client.CloseIdleConnections()
	}
	return tunnels
}

// heldLease is the local record of a lease the session holds.
type heldLease struct {
	taskID    string
	epoch     uint64
	signature string
	heartbeat time.Duration
	deadline  time.Time // monotonic; writes stop at this instant
	blocked   reason    // set when the cluster reports a non-active status
	holding   reason    // set while the worker's release or wait is in flight
	ckptSeq   uint64
	ckptStep  string
	ordinal   uint64      // writes forwarded with a derived key since ckptSeq
	gen       *generation // nil while not current
}

// leaseSnap is what a request needs of a current lease.
type leaseSnap struct {
	TaskID    string
	Epoch     uint64
	Signature string
	Deadline  time.Time
	gen       *generation
}

type goneLease struct {
	epoch  uint64
	reason reason
}

// goneLimit bounds the tombstones kept to name the reason of a block.
const goneLimit = 256

// leaseTable is the sidecar's local view of its leases. Every read
// compares deadlines with the caller's now, so the view is never more
// optimistic than the clock.
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
// request sent at sent.
func (t *leaseTable) deadlineFor(sent time.Time, validFor time.Duration) time.Time {
	if DeadlineCheckDisabled {
		return sent.Add(100 * 365 * 24 * time.Hour)
	}
	return sent.Add(validFor - margin(validFor, t.drift, t.floor))
}

// grant records a new lease from an acquire or claim sent at sent. A
// grant replaces any older record of the task.
func (t *leaseTable) grant(g api.Grant, sent, now time.Time) leaseSnap {
	l := &heldLease{
		taskID:    g.Lease.TaskID,
		epoch:     g.Lease.Epoch,
		signature: g.TokenSignature,
		heartbeat: time.Duration(g.HeartbeatMs) * time.Millisecond,
		deadline:  t.deadlineFor(sent, time.Duration(g.ValidForMs)*time.Millisecond),
	}
	if l.taskID == "" {
		l.taskID = g.Task.ID
	}
	if cp := g.Task.Checkpoint; cp != nil {
		l.ckptSeq, l.ckptStep = cp.Seq, cp.Step
	}
	if g.Lease.Status != "" && g.Lease.Status != lease.StatusActive {
		l.blocked = reasonFromStatus(g.Lease.Status)
	}
	current := l.blocked == "" && now.Before(l.deadline)
	t.mu.Lock()
	old := t.held[l.taskID]
	var cut *generation
	if old != nil && old.epoch == l.epoch {
		// The same grant again (a retried acquire): keep its deadline if
		// later, its write ordinal and its generation, so nothing in flight
		// is orphaned.
		if old.deadline.After(l.deadline) {
			l.deadline = old.deadline
		}
		l.ordinal = old.ordinal
		if old.ckptSeq > l.ckptSeq {
			l.ckptSeq, l.ckptStep = old.ckptSeq, old.ckptStep
		}
		if current && old.gen != nil && !old.gen.isCut() {
			l.gen = old.gen
		} else {
			cut = old.gen
		}
	} else if old != nil {
		cut = old.gen
	}
	if current && l.gen == nil {
		l.gen = newGeneration()
	}
	if l.gen != nil {
		l.gen.setDeadline(l.deadline)
	}
	t.held[l.taskID] = l
	delete(t.gone, l.taskID)
	t.mu.Unlock()
	if cut != nil && cut != l.gen {
		cut.cutAll()
	}
	return l.snap()
}

func (l *heldLease) snap() leaseSnap {
	return leaseSnap{TaskID: l.taskID, Epoch: l.epoch, Signature: l.signature, Deadline: l.deadline, gen: l.gen}
}

// current returns the current lease of taskID ("" = the only lease
// held) or why there is none.
func (t *leaseTable) current(taskID string, now time.Time) (leaseSnap, reason) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var l *heldLease
	if taskID == "" {
		switch len(t.held) {
		case 0:
			if len(t.gone) == 1 {
				for id, g := range t.gone {
					return leaseSnap{TaskID: id, Epoch: g.epoch}, g.reason
				}
			}
			return leaseSnap{}, reasonNone
		case 1:
			for _, h := range t.held {
				l = h
			}
		default:
			return leaseSnap{}, reasonAmbig
		}
	} else {
		l = t.held[taskID]
		if l == nil {
			if g, ok := t.gone[taskID]; ok {
				return leaseSnap{TaskID: taskID, Epoch: g.epoch}, g.reason
			}
			return leaseSnap{TaskID: taskID}, reasonNone
		}
	}
	s := l.snap()
	switch {
	case l.holding != "":
		return s, l.holding
	case l.blocked != "":
		return s, l.blocked
	case !now.Before(l.deadline), l.gen == nil, l.gen.isCut():
		return s, reasonExpired
	}
	return s, ""
}

// renew applies one heartbeat reply entry for a request sent at sent. It
// reports the event the change causes, if any, and a generation to cut.
func (t *leaseTable) renew(ls api.LeaseState, sent, now time.Time) (ev EventKind, cut *generation, epoch uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.held[ls.TaskID]
	if l == nil || ls.Epoch < l.epoch {
		return "", nil, 0 // not ours, or about an older grant
	}
	drop := func(r reason, kind EventKind) (EventKind, *generation, uint64) {
		delete(t.held, l.taskID)
		t.tombstone(l.taskID, l.epoch, r)
		return kind, l.gen, l.epoch
	}
	if ls.Epoch > l.epoch {
		return drop(reasonLost, EventLost) // someone else holds a newer grant
	}
	switch ls.Signal {
	case api.SignalRevoked:
		return drop(reasonRevoked, EventRevoked)
	case api.SignalWaiting:
		return drop(reasonWaiting, EventLost)
	case api.SignalLost:
		r := reasonFromStatus(ls.Status)
		if r == "" || r == reasonSuspect {
			r = reasonLost
		}
		return drop(r, EventLost)
	}
	if l.holding != "" {
		// A release or wait is in flight: the lease stays blocked whatever
		// the cluster says, until the call fails (unhold) or succeeds (drop).
		if d := t.deadlineFor(sent, time.Duration(ls.ValidForMs)*time.Millisecond); ls.Status == lease.StatusActive && d.After(l.deadline) {
			l.deadline = d
		}
		return "", nil, l.epoch
	}
	if ls.Status != "" && ls.Status != lease.StatusActive {
		r := reasonFromStatus(ls.Status)
		if r != reasonSuspect {
			return drop(r, EventLost)
		}
		// Suspect: still ours, may come back; block until it does.
		wasCurrent := l.gen != nil && l.blocked == "" && now.Before(l.deadline)
		l.blocked = reasonSuspect
		g := l.gen
		l.gen = nil
		if wasCurrent {
			return EventLost, g, l.epoch
		}
		return "", g, l.epoch
	}
	if d := t.deadlineFor(sent, time.Duration(ls.ValidForMs)*time.Millisecond); d.After(l.deadline) {
		l.deadline = d
	}
	wasBlocked := l.blocked != "" || l.gen == nil || l.gen.isCut()
	l.blocked = ""
	if wasBlocked && now.Before(l.deadline) {
		l.gen = newGeneration()
		l.gen.setDeadline(l.deadline)
		return EventRevived, nil, l.epoch
	}
	if l.gen != nil {
		l.gen.setDeadline(l.deadline)
	}
	return "", nil, l.epoch
}

func reasonFromStatus(s lease.Status) reason {
	switch s {
	case lease.StatusActive:
		return ""
	case lease.StatusSuspectDead:
		return reasonSuspect
	case lease.StatusRevoked:
		return reasonRevoked
	case lease.StatusPausedWaiting:
		return reasonWaiting
	case lease.StatusReleased:
		return reasonReleased
	default: // expired, reclaimed
		return reasonExpired
	}
}

// tombstone remembers why a task's lease ended; t.mu must be held.
func (t *leaseTable) tombstone(taskID string, epoch uint64, r reason) {
	if len(t.gone) >= goneLimit {
		for k := range t.gone { // evict an arbitrary one; they are only hints
			delete(t.gone, k)
			break
		}
	}
	t.gone[taskID] = goneLease{epoch: epoch, reason: r}
}

// hold blocks new writes of a lease while the worker's release or wait
// is in flight, and returns its generation for the caller to cut: once
// the call commits, nobody may write under the epoch, so nothing may slip
// out between the commit and the local drop.
func (t *leaseTable) hold(taskID string, epoch uint64, r reason) (*generation, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.held[taskID]
	if l == nil || l.epoch != epoch {
		return nil, false
	}
	l.holding = r
	g := l.gen
	l.gen = nil
	return g, true
}

// unhold undoes hold after the call failed; the lease is current again if
// its deadline has not passed.
func (t *leaseTable) unhold(taskID string, epoch uint64, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.held[taskID]
	if l == nil || l.epoch != epoch || l.holding == "" {
		return
	}
	l.holding = ""
	if l.gen == nil && l.blocked == "" && now.Before(l.deadline) {
		l.gen = newGeneration()
		l.gen.setDeadline(l.deadline)
	}
}

// drop removes the lease of taskID (when its epoch matches, or epoch is
// 0) and returns its generation for the caller to cut.
func (t *leaseTable) drop(taskID string, epoch uint64, r reason) (*generation, uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.held[taskID]
	if l == nil || (epoch != 0 && l.epoch != epoch) {
		return nil, 0, false
	}
	delete(t.held, taskID)
	t.tombstone(taskID, l.epoch, r)
	return l.gen, l.epoch, true
}

// dropAll removes every lease (the session is gone).
func (t *leaseTable) dropAll(r reason) []*heldLease {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*heldLease
	for id, l := range t.held {
		delete(t.held, id)
		t.tombstone(id, l.epoch, r)
		out = append(out, l)
	}
	return out
}

// expireDue takes the generation away from every lease whose deadline has
// passed and returns those leases; the caller cuts and publishes.
func (t *leaseTable) expireDue(now time.Time) []*heldLease {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*heldLease
	for _, l := range t.held {
		if l.gen != nil && !now.Before(l.deadline) {
			out = append(out, &heldLease{taskID: l.taskID, epoch: l.epoch, gen: l.gen})
			l.gen = nil
		}
	}
	return out
}

// nextDeadline returns the earliest deadline of a current lease.
func (t *leaseTable) nextDeadline() (time.Time, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var d time.Time
	for _, l := range t.held {
		if l.gen != nil && (d.IsZero() || l.deadline.Before(d)) {
			d = l.deadline
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

// LeaseView is the local view of one lease, as GET /v1/lease returns it.
type LeaseView struct {
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
func (t *leaseTable) views(now time.Time) []LeaseView {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]LeaseView, 0, len(t.held))
	for _, l := range t.held {
		v := LeaseView{
			TaskID: l.taskID, Epoch: l.epoch, HeartbeatMs: l.heartbeat.Milliseconds(),
			CheckpointSeq: l.ckptSeq, CheckpointStep: l.ckptStep, WritesSinceCkp: l.ordinal,
		}
		rem := l.deadline.Sub(now)
		switch {
		case l.holding != "":
			v.Status = string(l.holding)
		case l.blocked != "":
			v.Status = string(l.blocked)
		case rem <= 0 || l.gen == nil || l.gen.isCut():
			v.Status = string(reasonExpired)
		default:
			v.Status, v.Current, v.RemainingMs = "current", true, rem.Milliseconds()
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
		if l.blocked != "" || l.holding != "" || l.gen == nil {
			continue
		}
		r := l.deadline.Sub(now)
		if r < 0 {
			r = 0
		}
		if m < 0 || r < m {
			m = r
		}
	}
	if m < 0 {
		return 0
	}
	return m
}

// count returns the number of held leases.
func (t *leaseTable) count() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.held)
}
