package lease

import (
	"errors"
	"sort"
	"time"
)

// DedupWindow is how long, in leader-stamped time, a request id is
// remembered. A client retrying after ErrLeadershipLost does so within
// seconds; ten minutes leaves a wide margin.
const DedupWindow = 10 * time.Minute

// DedupMax bounds the remembered request ids regardless of age.
const DedupMax = 200_000

// Model is the replicated state. It is not safe for concurrent use: the FSM
// serialises Apply and guards reads with its own lock.
type Model struct {
	tasks    map[string]*Task
	sessions map[string]*Session
	// held maps a session id to the ids of tasks whose live lease it holds;
	// derived from tasks, rebuilt on restore.
	held  map[string]map[string]struct{}
	queue claimQueue

	dedup      map[string]dedupEntry
	dedupOrder []dedupRef
	// lastIndex is the raft index of the last applied command.
	lastIndex uint64
}

type dedupEntry struct {
	Index  uint64    `json:"i"`
	Code   string    `json:"c,omitempty"`
	TaskID string    `json:"t,omitempty"`
	Epoch  uint64    `json:"e,omitempty"`
	Key    string    `json:"k,omitempty"`
	At     time.Time `json:"at"`
}

type dedupRef struct {
	ID string    `json:"id"`
	At time.Time `json:"at"`
}

// New returns an empty model.
func New() *Model {
	return &Model{
		tasks:    map[string]*Task{},
		sessions: map[string]*Session{},
		held:     map[string]map[string]struct{}{},
		dedup:    map[string]dedupEntry{},
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
	m.pruneDedup(cmd.Time)
	if cmd.RequestID != "" {
		if d, ok := m.dedup[cmd.RequestID]; ok {
			return m.replay(d)
		}
	}
	res := m.apply(index, cmd)
	if cmd.RequestID != "" {
		d := dedupEntry{Index: index, Code: errCode(res.Err), At: cmd.Time}
		if res.Task != nil {
			d.TaskID = res.Task.ID
		}
		if res.Lease != nil {
			d.Epoch = res.Lease.Epoch
		}
		if res.Effect != nil {
			d.Key = res.Effect.Key
		}
		m.dedup[cmd.RequestID] = d
		m.dedupOrder = append(m.dedupOrder, dedupRef{ID: cmd.RequestID, At: cmd.Time})
	}
	return res
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

func (m *Model) pruneDedup(now time.Time) {
	n := 0
	for n < len(m.dedupOrder) {
		r := m.dedupOrder[n]
		if len(m.dedupOrder)-n <= DedupMax && now.Sub(r.At) < DedupWindow {
			break
		}
		delete(m.dedup, r.ID)
		n++
	}
	if n > 0 {
		// Drop the prefix in place: copying the rest on every prune made
		// each Apply O(remembered ids) once ids expire one per command.
		// append moves the live part to a new array when it grows.
		clear(m.dedupOrder[:n])
		m.dedupOrder = m.dedupOrder[n:]
	}
}

// replay rebuilds the result of a request applied before, from what is left
// of it now: the error, and the lease with the epoch it produced.
func (m *Model) replay(d dedupEntry) Result {
	res := Result{Err: codeErr(d.Code), Duplicate: true}
	t := m.tasks[d.TaskID]
	if t == nil {
		return res
	}
	res.Task = t.clone()
	if d.Epoch != 0 {
		res.Lease = t.leaseWithEpoch(d.Epoch)
	}
	if d.Key != "" {
		if e := t.effect(d.Key); e != nil {
			res.Effect = e.clone()
		}
	}
	return res
}

var errCodes = map[error]string{
	ErrInvalid: "invalid", ErrTaskNotFound: "task_not_found", ErrTaskExists: "task_exists",
	ErrSessionNotFound: "session_not_found", ErrLeaseHeld: "lease_held", ErrTaskWaiting: "task_waiting",
	ErrTaskFinal: "task_final", ErrNotClaimable: "not_claimable", ErrNoTask: "no_task",
	ErrStaleEpoch: "stale_epoch", ErrNotHolder: "not_holder", ErrLeaseNotActive: "lease_not_active",
	ErrCheckpointSeq: "checkpoint_seq", ErrNotWaiting: "not_waiting", ErrIntentsInFlight: "intents_in_flight",
	ErrInDoubt: "in_doubt", ErrJournalFull: "journal_full",
}

// ErrorCode returns the stable short name of a model error ("" for nil).
// The HTTP layer uses it as the tail of a problem type.
func ErrorCode(err error) string { return errCode(err) }

func errCode(err error) string {
	if err == nil {
		return ""
	}
	for e, c := range errCodes {
		if errors.Is(err, e) {
			return c
		}
	}
	return "invalid"
}

func codeErr(code string) error {
	if code == "" {
		return nil
	}
	for e, c := range errCodes {
		if c == code {
			return e
		}
	}
	return ErrInvalid
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
	for tid := range set {
		if l := m.tasks[tid].Lease; l != nil {
			out = append(out, *l)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TaskID < out[j].TaskID })
	return out
}

// LiveLeases returns copies of every lease that still blocks a new grant
// (active, suspect_dead, expired), ordered by task id. A new leader uses it
// to rebuild its expiry bookkeeping.
func (m *Model) LiveLeases() []Lease {
	var out []Lease
	for _, set := range m.held {
		for tid := range set {
			out = append(out, *m.tasks[tid].Lease)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TaskID < out[j].TaskID })
	return out
}

// WaitingDue returns the ids of waiting tasks whose wait deadline is at or
// before now, for the leader to signal.
func (m *Model) WaitingDue(now time.Time) []string {
	var out []string
	for id, t := range m.tasks {
		if t.State == TaskWaiting && !t.WaitDeadline.IsZero() && !now.Before(t.WaitDeadline) {
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
	c.qidx = 0
	if t.Lease != nil {
		l := *t.Lease
		c.Lease = &l
	}
	c.History = append([]Lease(nil), t.History...)
	c.Payload = cloneBytes(t.Payload)
	c.Signal = cloneBytes(t.Signal)
	c.Result = cloneBytes(t.Result)
	if t.Checkpoint != nil {
		cp := *t.Checkpoint
		cp.Data = cloneBytes(cp.Data)
		c.Checkpoint = &cp
	}
	if t.Journal != nil {
		c.Journal = make([]*Effect, len(t.Journal))
		for i, e := range t.Journal {
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
	for i := range t.History {
		if t.History[i].Epoch == epoch {
			l := t.History[i]
			return &l
		}
	}
	return nil
}

func (t *Task) effect(key string) *Effect {
	for _, e := range t.Journal {
		if e.Key == key {
			return e
		}
	}
	return nil
}
