package lease

import (
	"strconv"
	"time"
)

// Status is the state of one lease (DESIGN.md 3).
type Status string

// Lease statuses. Only StatusActive lets the holder write.
const (
	StatusActive        Status = "active"
	StatusPausedWaiting Status = "paused_waiting_external"
	StatusSuspectDead   Status = "suspect_dead"
	StatusExpired       Status = "expired"
	StatusReclaimed     Status = "reclaimed"
	StatusRevoked       Status = "revoked"
	StatusReleased      Status = "released"
)

// Live reports whether a lease in this status still blocks a new grant:
// active and suspect_dead may return to the holder, expired still waits for
// the resume guard.
func (s Status) Live() bool {
	return s == StatusActive || s == StatusSuspectDead || s == StatusExpired
}

// TaskState is the state of a task.
type TaskState string

// Task states.
const (
	TaskPending   TaskState = "pending"
	TaskLeased    TaskState = "leased"
	TaskWaiting   TaskState = "waiting"
	TaskCompleted TaskState = "completed"
	TaskFailed    TaskState = "failed"
	TaskCancelled TaskState = "cancelled"
)

// Final reports whether no lease can ever be granted on the task again.
func (s TaskState) Final() bool {
	return s == TaskCompleted || s == TaskFailed || s == TaskCancelled
}

// Outcome is how a holder ends its lease.
type Outcome string

// Release outcomes.
const (
	OutcomeCompleted Outcome = "completed"
	OutcomeFailed    Outcome = "failed"
	OutcomeGivenBack Outcome = "given_back"
)

// Checkpoint is the latest durable progress record of a task. It is handed
// to the next owner after a reclaim.
type Checkpoint struct {
	Seq   uint64 `json:"seq"`
	Step  string `json:"step,omitempty"`
	Data  []byte `json:"data,omitempty"`
	Epoch uint64 `json:"epoch"`
	At    Stamp  `json:"at"`
}

// Lease is the seed's lease record. Epoch is also the fencing token.
// ExpiresAt and HeartbeatAt are as of the last raft-applied change: renewals
// live in the leader's memory, so the API overlays the leader's view.
type Lease struct {
	// id is the lease's id when its grant named one (Command.LeaseID);
	// nil for the default, "lease-" and the epoch, which every grant the
	// cluster makes itself has: a lease keeps no copy of it (ID). Its
	// pointer keeps the struct at 144 bytes, where a string took 160.
	id          *string
	TaskID      string        `json:"taskId"`
	WorkerID    string        `json:"workerId"`
	SessionID   string        `json:"sessionId"`
	Epoch       uint64        `json:"leaseEpoch"`
	AcquiredAt  Stamp         `json:"acquiredAt"`
	ExpiresAt   Stamp         `json:"expiresAt"`
	HeartbeatAt Stamp         `json:"heartbeatAt"`
	TTL         time.Duration `json:"-"` // on the wire as ttlMs (json.go)
	Status      Status        `json:"status"`
	StatusAt    Stamp         `json:"statusAt"`
	Reason      string        `json:"reason,omitempty"`
	// ProgressAt is the moment the lease's progress deadline counts from:
	// its last progress the leader knows of (a checkpoint or a progress
	// mark carried by a heartbeat), its grant, or the leader's taking
	// office, whichever is latest. It lives in the leader's memory, never
	// in the replicated record: the API overlays it on live leases, and it
	// is zero when read from a follower.
	ProgressAt Stamp `json:"progressAt,omitzero"`
}

// ID returns the lease's id: the one its grant named, or "lease-" and its
// epoch.
func (l *Lease) ID() string {
	if l.id != nil {
		return *l.id
	}
	return defaultLeaseID(l.Epoch)
}

// SetID gives the lease id as its id; the default for its epoch is kept
// as no id at all.
func (l *Lease) SetID(id string) {
	if id == defaultLeaseID(l.Epoch) {
		l.id = nil
		return
	}
	l.id = &id
}

func defaultLeaseID(epoch uint64) string {
	return "lease-" + strconv.FormatUint(epoch, 10)
}

// EffectState is the state of one journaled side effect.
type EffectState string

// Effect states.
const (
	EffectIntent  EffectState = "intent"   // recorded before the call, no outcome yet
	EffectDone    EffectState = "done"     // outcome recorded
	EffectInDoubt EffectState = "in_doubt" // owner lost before an outcome was recorded
)

// Effect is one journaled write: the intent recorded before the call and,
// once known, its outcome. A later owner repeating the key gets the outcome.
type Effect struct {
	Key        string              `json:"key"`
	Epoch      uint64              `json:"epoch"`
	Method     string              `json:"method"`
	URL        string              `json:"url"`
	BodyDigest string              `json:"bodyDigest,omitempty"`
	Deadline   Stamp               `json:"deadline"`
	State      EffectState         `json:"state"`
	Status     int                 `json:"status,omitempty"`
	Header     map[string][]string `json:"header,omitempty"`
	Body       []byte              `json:"body,omitempty"`
	RecordedAt Stamp               `json:"recordedAt"`
}

// Task is one unit of work and everything the cluster knows about it.
type Task struct {
	ID          string        `json:"taskId"`
	Profile     string        `json:"profile"`
	TTL         time.Duration `json:"-"` // on the wire as ttlMs (json.go)
	Heartbeat   time.Duration `json:"-"` // on the wire as heartbeatMs (json.go)
	Priority    int           `json:"priority"`
	Payload     []byte        `json:"payload,omitempty"`
	State       TaskState     `json:"state"`
	CreatedAt   Stamp         `json:"createdAt"`
	UpdatedAt   Stamp         `json:"updatedAt"`
	ClaimableAt Stamp         `json:"claimableAt"`
	Attempts    uint64        `json:"attempts"`
	MaxEpoch    uint64        `json:"maxEpoch"`
	Lease       *Lease        `json:"lease,omitempty"`
	Checkpoint  *Checkpoint   `json:"checkpoint,omitempty"`
	// Owner is the identity that created the task (its quotas are
	// charged); empty for tasks created before identities existed.
	Owner string `json:"owner,omitempty"`

	// more holds the fields a task with its first lease has not set yet,
	// nil while they are all zero. A live lease's task is what the
	// cluster holds 100,000 of, and these six fields were 120 of its
	// 312 bytes. Read them through the methods of the same names; change
	// them through More.
	more *TaskMore

	// q is the task's slot in the claim queue, nil when not queued; derived.
	q *qslot
	// held is 1 + the task's slot in Model.held under its lease's
	// session, 0 when its lease is not live; derived.
	held int
	// gen is the model generation the task was created or last copied in:
	// a task older than the model's generation may be read by a snapshot
	// view and is copied before it is changed (view.go).
	gen uint64
}

// TaskMore is the part of a Task most live tasks leave zero: the leases
// it had before, its wait, its signal and outcome, and its journal. On the
// wire its fields are the task's own (json.go).
type TaskMore struct {
	History      []Lease   `json:"history,omitempty"`
	WaitDeadline Stamp     `json:"waitDeadline,omitzero"`
	Signal       []byte    `json:"signal,omitempty"`
	Result       []byte    `json:"result,omitempty"`
	Reason       string    `json:"reason,omitempty"`
	Journal      []*Effect `json:"journal,omitempty"`
}

// History returns the task's earlier leases, oldest first, at most
// HistoryLimit of them.
func (t *Task) History() []Lease {
	if t.more == nil {
		return nil
	}
	return t.more.History
}

// WaitDeadline returns when a waiting task's wait ends, zero for none.
func (t *Task) WaitDeadline() Stamp {
	if t.more == nil {
		return 0
	}
	return t.more.WaitDeadline
}

// Signal returns the payload that ended the task's wait, if any.
func (t *Task) Signal() []byte {
	if t.more == nil {
		return nil
	}
	return t.more.Signal
}

// Result returns the result its last holder released it with, if any.
func (t *Task) Result() []byte {
	if t.more == nil {
		return nil
	}
	return t.more.Result
}

// Reason returns why the task was failed, cancelled or signalled, if it
// says.
func (t *Task) Reason() string {
	if t.more == nil {
		return ""
	}
	return t.more.Reason
}

// Journal returns the task's journaled side effects.
func (t *Task) Journal() []*Effect {
	if t.more == nil {
		return nil
	}
	return t.more.Journal
}

// More returns the task's rarely set fields for changing, allocating them
// on first use. A shallow copy of a Task shares them: change a copy's
// only after clone (the model copies before it changes, Model.writable).
func (t *Task) More() *TaskMore {
	if t.more == nil {
		t.more = &TaskMore{}
	}
	return t.more
}

// DropPast removes the task's earlier leases and journal. It replaces
// TaskMore instead of changing it, so it is safe on a shallow copy of a
// task someone else still reads.
func (t *Task) DropPast() {
	if t.more == nil || (t.more.History == nil && t.more.Journal == nil) {
		return
	}
	m := *t.more
	m.History, m.Journal = nil, nil
	t.more = &m
	t.tidy()
}

// Session is one sidecar's liveness handle. Heartbeats renew it (and every
// lease held through it) in the leader's memory, not here.
type Session struct {
	ID       string `json:"sessionId"`
	WorkerID string `json:"workerId"`
	// Owner is the identity that opened the session; only it may act
	// through the session. Empty for sessions opened before identities.
	Owner     string `json:"owner,omitempty"`
	CreatedAt Stamp  `json:"createdAt"`
}

// HistoryLimit bounds the lease records kept per task.
const HistoryLimit = 16

// JournalLimit bounds the journaled effects kept per task.
const JournalLimit = 1024
