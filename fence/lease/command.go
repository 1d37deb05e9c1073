package lease

import "time"

// Op names a state change. Values are stable: they are written to the raft log.
type Op uint8

// Operations. Append only; never renumber.
const (
	OpOpenSession  Op = 1
	OpCloseSession Op = 2
	OpCreateTask   Op = 3
	OpAcquire      Op = 4
	OpClaim        Op = 5
	OpCheckpoint   Op = 6
	OpWait         Op = 7
	OpSignal       Op = 8
	OpRelease      Op = 9
	OpRevoke       Op = 10
	OpCancel       Op = 11
	OpSuspect      Op = 12
	OpRevive       Op = 13
	OpExpire       Op = 14
	OpReclaim      Op = 15
	OpIntent       Op = 16
	OpOutcome      Op = 17
	OpDeleteTask   Op = 18
)

var opNames = map[Op]string{
	OpOpenSession: "open_session", OpCloseSession: "close_session", OpCreateTask: "create_task",
	OpAcquire: "acquire", OpClaim: "claim", OpCheckpoint: "checkpoint", OpWait: "wait",
	OpSignal: "signal", OpRelease: "release", OpRevoke: "revoke", OpCancel: "cancel",
	OpSuspect: "suspect", OpRevive: "revive", OpExpire: "expire", OpReclaim: "reclaim",
	OpIntent: "intent", OpOutcome: "outcome", OpDeleteTask: "delete_task",
}

// String returns the op's stable name, used in logs and metrics labels.
func (o Op) String() string {
	if n, ok := opNames[o]; ok {
		return n
	}
	return "unknown"
}

// Command is one state change, as written to the raft log. Only the fields
// an op needs are set. Time is stamped by the leader when it proposes, so
// Apply never reads the clock.
type Command struct {
	Op        Op        `json:"op"`
	RequestID string    `json:"rid,omitempty"`
	Time      time.Time `json:"t"`

	TaskID    string `json:"task,omitempty"`
	SessionID string `json:"session,omitempty"`
	WorkerID  string `json:"worker,omitempty"`
	LeaseID   string `json:"lease,omitempty"`
	// Owner is the identity of the API caller the command comes from
	// ("role/name"); empty for the leader's own proposals. Session-scoped
	// commands are refused unless it owns the session (owner.go).
	Owner string `json:"owner,omitempty"`
	// Quota is the caller's quota, stamped by the leader from its
	// configuration on commands that open sessions or create tasks.
	Quota *Quota `json:"quota,omitempty"`

	// Epoch is the epoch the proposer expects to be current; a command whose
	// epoch is not current is a no-op that returns ErrStaleEpoch.
	Epoch uint64 `json:"epoch,omitempty"`

	// Task creation (OpCreateTask, and OpAcquire with Create).
	Create    bool          `json:"create,omitempty"`
	Profile   string        `json:"profile,omitempty"`
	TTL       time.Duration `json:"ttl,omitempty"`
	Heartbeat time.Duration `json:"hb,omitempty"`
	Priority  int           `json:"prio,omitempty"`
	Payload   []byte        `json:"payload,omitempty"`

	// OpCheckpoint.
	Seq  uint64 `json:"seq,omitempty"`
	Step string `json:"step,omitempty"`
	// SeqWindow, stamped by the proposer (MaxCheckpointSeqJump), is how far
	// an explicit seq may exceed the latest. Zero (entries written before
	// the rule) applies no window, so replaying an old log gives the state
	// it gave then.
	SeqWindow uint64 `json:"seqWin,omitempty"`
	Data      []byte `json:"data,omitempty"`

	// OpWait (deadline, zero = none), OpIntent (effect deadline).
	Deadline Stamp `json:"deadline,omitzero"`

	// OpRelease, OpRevoke, OpCancel, OpSignal.
	Outcome Outcome `json:"outcome,omitempty"`
	Result  []byte  `json:"result,omitempty"`
	Reason  string  `json:"reason,omitempty"`

	// OpIntent / OpOutcome.
	Effect *Effect `json:"effect,omitempty"`
}

// Result is what Apply returns. Task and Lease are copies the caller may keep.
type Result struct {
	Err   error
	Task  *Task
	Lease *Lease
	// Effect is the journal record an OpIntent found or created.
	Effect *Effect
	// InDoubt lists the effects an OpReclaim marked in doubt; they are also
	// kept in the task's journal for the next owner.
	InDoubt []*Effect
	// Released lists the leases OpCloseSession gave back.
	Released []Lease
	// Duplicate is set when the request id was applied before; the result
	// then reflects the first application.
	Duplicate bool
}

// at returns the command's leader-stamped time as the model keeps it.
func (c *Command) at() Stamp { return StampOf(c.Time) }
