package lease

import (
	"sort"
	"sync/atomic"
	"time"
)

// Model is the replicated state. It is not safe for concurrent use: the FSM
// serialises Apply and guards reads with its own lock. A View taken from it
// may be written out concurrently with later Applies (view.go).
type Model struct {
	tasks    map[string]*Task
	sessions map[string]*Session
	// held maps a session id to the tasks whose live lease it holds, in
	// no particular order (Task.held is each one's slot); derived from
	// tasks, rebuilt on restore. A slice, not a set: a heartbeat walks its
	// session's leases, and 16 bytes a lease in a row cost a third of a
	// map's slots and read faster.
	held  map[string][]*Task
	queue claimQueue
	// owned maps an identity to what it holds (quotas); derived.
	owned map[string]*usage
	// ownedBytes is the payload bytes of every owned task, all identities
	// together (Quota.TotalBytes); derived.
	ownedBytes int64

	dedup dedupLog
	// lastIndex is the raft index of the last applied command.
	lastIndex uint64

	// gen is bumped by every View; views counts the views not yet
	// released. While views > 0 a task of an older generation is copied
	// before it is changed (writable).
	gen   uint64
	views atomic.Int32
}

// New returns an empty model.
func New() *Model {
	return &Model{
		tasks:    map[string]*Task{},
		sessions: map[string]*Session{},
		held:     map[string][]*Task{},
		owned:    map[string]*usage{},
		dedup:    newDedupLog(),
	}
}

// Apply performs cmd, committed at raft index index, and returns its result.
// Indexes must increase across calls; the index of a granting command becomes
// the new lease's epoch, which is what makes epochs strictly increasing per
// task and never reused, even across a task's deletion and re-creation.
func (m *Model) Apply(index uint64, cmd *Command) Result {
	if index > m.lastIndex {
		m.lastIndex = index
	}
	m.dedup.prune(cmd.at(), m.views.Load() > 0)
	var fp uint64
	if cmd.RequestID != "" {
		fp = cmd.fingerprint()
		if d, ok := m.dedup.get(cmd.RequestID); ok {
			if d.fp != 0 && d.fp != fp {
				// The id names another command: answering with that
				// command's result would claim this one was applied.
				return Result{Err: ErrRequestReused}
			}
			return m.replay(d)
		}
	}
	res := m.applyOwned(index, cmd)
	if cmd.RequestID != "" {
		d := dedupRec{id: cmd.RequestID, index: index, code: codeOf(res.Err), at: cmd.at(), fp: fp}
		if res.Task != nil {
			d.taskID = res.Task.ID // shares the model's copy of the id
		}
		if res.Lease != nil {
			d.epoch = res.Lease.Epoch
		}
		if res.Effect != nil {
			d.key = res.Effect.Key
		}
		m.dedup.add(d)
	}
	return res
}

// writable returns t ready to be changed: t itself, or, while a snapshot
// view may read t, a private copy that replaces it in the model. Every
// transition changes tasks only through it.
func (m *Model) writable(t *Task) *Task {
	if t.gen == m.gen || m.views.Load() == 0 {
		return t
	}
	c := t.clone()
	c.gen = m.gen
	if c.q = t.q; c.q != nil {
		c.q.t = c
	}
	if c.held = t.held; c.held > 0 {
		m.held[c.Lease.SessionID][c.held-1] = c
	}
	m.tasks[c.ID] = c
	return c
}

// task returns the task with id, writable.
func (m *Model) task(id string) (*Task, bool) {
	t, ok := m.tasks[id]
	if !ok {
		return nil, false
	}
	return m.writable(t), true
}

// applyOwned applies c once its sender is allowed to act on the session
// it names.
func (m *Model) applyOwned(index uint64, c *Command) Result {
	if err := m.checkOwner(c); err != nil {
		return Result{Err: err}
	}
	return m.apply(index, c)
}

func (m *Model) apply(index uint64, c *Command) Result {
	switch c.Op {
	case OpOpenSession:
		return m.openSession(c)
	case OpCloseSession:
		return m.closeSession(c)
	case OpCreateTask:
		return m.createTask(c)
	case OpAcquire:
		return m.acquire(index, c)
	case OpClaim:
		return m.claim(index, c)
	case OpCheckpoint:
		return m.checkpoint(c)
	case OpWait:
		return m.wait(c)
	case OpSignal:
		return m.signal(c)
	case OpRelease:
		return m.release(c)
	case OpRevoke:
		return m.revoke(c)
	case OpCancel:
		return m.cancel(c)
	case OpSuspect:
		return m.suspect(c)
	case OpRevive:
		return m.revive(c)
	case OpExpire:
		return m.expire(c)
	case OpReclaim:
		return m.reclaim(c)
	case OpIntent:
		return m.intent(c)
	case OpOutcome:
		return m.outcome(c)
	case OpDeleteTask:
		return m.deleteTask(c)
	}
	return Result{Err: ErrInvalid}
}

// replay rebuilds the result of a request applied before, from what is left
// of it now: the error, and the lease with the epoch it produced.
func (m *Model) replay(d *dedupRec) Result {
	res := Result{Err: d.code.err(), Duplicate: true}
	t := m.tasks[d.taskID]
	if t == nil {
		return res
	}
	res.Task = t.clone()
	if d.epoch != 0 {
		res.Lease = t.leaseWithEpoch(d.epoch)
	}
	if d.key != "" {
		if e := t.effect(d.key); e != nil {
			res.Effect = e.clone()
		}
	}
	return res
}

// LastIndex returns the raft index of the last applied command.
func (m *Model) LastIndex() uint64 { return m.lastIndex }

// Task returns a copy of the task with id, if it exists.
func (m *Model) Task(id string) (*Task, bool) {
	t, ok := m.tasks[id]
	if !ok {
		return nil, false
	}
	return t.clone(), true
}

// TaskFilter selects tasks in Tasks. Zero fields match everything.
type TaskFilter struct {
	State  TaskState
	Status Status // status of the current lease
	After  string // task id to start after (pagination)
	Limit  int
}

// Tasks returns copies of the tasks matching f, ordered by id.
func (m *Model) Tasks(f TaskFilter) []*Task {
	ids := make([]string, 0, len(m.tasks))
	for id, t := range m.tasks {
		if id <= f.After && f.After != "" {
			continue
		}
		if f.State != "" && t.State != f.State {
			continue
		}
		if f.Status != "" && (t.Lease == nil || t.Lease.Status != f.Status) {
			continue
		}
		ids = append(ids, id)
	}
	sort.Strings(ids)
	if f.Limit > 0 && len(ids) > f.Limit {
		ids = ids[:f.Limit]
	}
	out := make([]*Task, len(ids))
	for i, id := range ids {
		out[i] = m.tasks[id].clone()
	}
	return out
}

// Session returns a copy of the session with id, if open.
func (m *Model) Session(id string) (*Session, bool) {
	s, ok := m.sessions[id]
	if !ok {
		return nil, false
	}
	c := *s
	return &c, true
}

// Sessions returns copies of every open session, ordered by id.
func (m *Model) Sessions() []*Session {
	out := make([]*Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		c := *s
		out = append(out, &c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// SessionLeases returns copies of the live leases held through session id
// (active, suspect_dead or expired), ordered by task id.
func (m *Model) SessionLeases(id string) []Lease {
	set := m.held[id]
	out := make([]Lease, 0, len(set))
	for _, t := range set {
		out = append(out, *t.Lease)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TaskID < out[j].TaskID })
	return out
}

// LiveLeases returns copies of every lease that still blocks a new grant
// (active, suspect_dead, expired), ordered by task id. A new leader uses it
// to rebuild its expiry bookkeeping.
func (m *Model) LiveLeases() []Lease { return m.LiveLeasesPage("", 0) }

// LiveLeasesPage returns the live leases of tasks ordered after after (by
// task id), at most limit of them (0: all). A page costs a walk over the
// live leases and a sort of those after after.
func (m *Model) LiveLeasesPage(after string, limit int) []Lease {
	var out []Lease
	for _, set := range m.held {
		for _, t := range set {
			if t.ID > after {
				out = append(out, *t.Lease)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TaskID < out[j].TaskID })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// WaitingDue returns the ids of waiting tasks whose wait deadline is at or
// before now, for the leader to signal.
func (m *Model) WaitingDue(now time.Time) []string {
	var out []string
	for id, t := range m.tasks {
		if t.State == TaskWaiting && !t.WaitDeadline().IsZero() && !now.Before(t.WaitDeadline().Time()) {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// Counts returns the number of tasks per state and of open sessions.
func (m *Model) Counts() (tasks map[TaskState]int, sessions int) {
	tasks = map[TaskState]int{}
	for _, t := range m.tasks {
		tasks[t.State]++
	}
	return tasks, len(m.sessions)
}

// clone returns a deep copy: callers may keep and modify it (the HTTP layer
// does) without touching replicated state.
func (t *Task) clone() *Task {
	c := *t
	c.q, c.gen, c.held = nil, 0, 0
	if t.Lease != nil {
		l := *t.Lease
		c.Lease = &l
	}
	c.Payload = cloneBytes(t.Payload)
	if t.Checkpoint != nil {
		cp := *t.Checkpoint
		cp.Data = cloneBytes(cp.Data)
		c.Checkpoint = &cp
	}
	c.more = t.more.clone()
	return &c
}

// setResult and setReason set one field of TaskMore, leaving a task
// without it when the value is zero and it had none.
func (t *Task) setResult(b []byte) {
	if b != nil || t.more != nil {
		t.More().Result = b
		t.tidy()
	}
}

func (t *Task) setReason(r string) {
	if r != "" || t.more != nil {
		t.More().Reason = r
		t.tidy()
	}
}

// tidy drops a TaskMore left all zero, so equal tasks are equal structs
// whether they were applied or restored from a snapshot (which decodes
// none for a task without the fields).
func (t *Task) tidy() {
	if x := t.more; x != nil && len(x.History) == 0 && x.WaitDeadline == 0 && len(x.Signal) == 0 &&
		len(x.Result) == 0 && x.Reason == "" && len(x.Journal) == 0 {
		t.more = nil
	}
}

func (x *TaskMore) clone() *TaskMore {
	if x == nil {
		return nil
	}
	c := *x
	c.History = append([]Lease(nil), x.History...)
	c.Signal = cloneBytes(x.Signal)
	c.Result = cloneBytes(x.Result)
	if x.Journal != nil {
		c.Journal = make([]*Effect, len(x.Journal))
		for i, e := range x.Journal {
			c.Journal[i] = e.clone()
		}
	}
	return &c
}

func (e *Effect) clone() *Effect {
	c := *e
	c.Body = cloneBytes(e.Body)
	if e.Header != nil {
		c.Header = make(map[string][]string, len(e.Header))
		for k, v := range e.Header {
			c.Header[k] = append([]string(nil), v...)
		}
	}
	return &c
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func (t *Task) leaseWithEpoch(epoch uint64) *Lease {
	if t.Lease != nil && t.Lease.Epoch == epoch {
		l := *t.Lease
		return &l
	}
	history := t.History()
	for i := range history {
		if history[i].Epoch == epoch {
			l := history[i]
			return &l
		}
	}
	return nil
}

func (t *Task) effect(key string) *Effect {
	for _, e := range t.Journal() {
		if e.Key == key {
			return e
		}
	}
	return nil
}
