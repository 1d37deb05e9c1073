package lease

import (
	"encoding/json"
	"time"
)

// Durations travel as integer milliseconds in fields ending in "Ms", the
// convention of the whole cluster API, so a non-Go client never has to know
// Go's nanosecond time.Duration. A sub-millisecond remainder (a TTL/3
// heartbeat, say) rides in an extra "...ExtraNs" field, omitted when zero:
// snapshots go through this encoding and must restore replicas exactly.
// leaseJSON is the lease's wire form, its fields in their order; the id
// is written out even when the lease keeps none (Lease.ID).
type leaseJSON struct {
	LeaseID     string `json:"leaseId"`
	TaskID      string `json:"taskId"`
	WorkerID    string `json:"workerId"`
	SessionID   string `json:"sessionId"`
	Epoch       uint64 `json:"leaseEpoch"`
	AcquiredAt  Stamp  `json:"acquiredAt"`
	ExpiresAt   Stamp  `json:"expiresAt"`
	HeartbeatAt Stamp  `json:"heartbeatAt"`
	Status      Status `json:"status"`
	StatusAt    Stamp  `json:"statusAt"`
	Reason      string `json:"reason,omitempty"`
	ProgressAt  Stamp  `json:"progressAt,omitzero"`
	TTLMs       int64  `json:"ttlMs"`
	TTLExtraNs  int64  `json:"ttlExtraNs,omitempty"`
}

// taskJSON lists the task's fields in the order they have always had on
// the wire, the rarely set ones (TaskMore) in their old places.
type taskJSON struct {
	ID               string      `json:"taskId"`
	Profile          string      `json:"profile"`
	Priority         int         `json:"priority"`
	Payload          []byte      `json:"payload,omitempty"`
	State            TaskState   `json:"state"`
	CreatedAt        Stamp       `json:"createdAt"`
	UpdatedAt        Stamp       `json:"updatedAt"`
	ClaimableAt      Stamp       `json:"claimableAt"`
	Attempts         uint64      `json:"attempts"`
	MaxEpoch         uint64      `json:"maxEpoch"`
	Lease            *Lease      `json:"lease,omitempty"`
	History          []Lease     `json:"history,omitempty"`
	Checkpoint       *Checkpoint `json:"checkpoint,omitempty"`
	WaitDeadline     Stamp       `json:"waitDeadline,omitzero"`
	Signal           []byte      `json:"signal,omitempty"`
	Result           []byte      `json:"result,omitempty"`
	Reason           string      `json:"reason,omitempty"`
	Journal          []*Effect   `json:"journal,omitempty"`
	Owner            string      `json:"owner,omitempty"`
	TTLMs            int64       `json:"ttlMs"`
	TTLExtraNs       int64       `json:"ttlExtraNs,omitempty"`
	HeartbeatMs      int64       `json:"heartbeatMs"`
	HeartbeatExtraNs int64       `json:"heartbeatExtraNs,omitempty"`
}

// splitMs splits d into whole milliseconds and the nanoseconds left over.
func splitMs(d time.Duration) (ms, extraNs int64) {
	return d.Milliseconds(), int64(d % time.Millisecond)
}

func joinMs(ms, extraNs int64) time.Duration {
	return time.Duration(ms)*time.Millisecond + time.Duration(extraNs)
}

// MarshalJSON encodes the lease with its TTL in milliseconds.
func (l Lease) MarshalJSON() ([]byte, error) {
	v := leaseJSON{LeaseID: l.ID(), TaskID: l.TaskID, WorkerID: l.WorkerID, SessionID: l.SessionID, Epoch: l.Epoch,
		AcquiredAt: l.AcquiredAt, ExpiresAt: l.ExpiresAt, HeartbeatAt: l.HeartbeatAt, Status: l.Status,
		StatusAt: l.StatusAt, Reason: l.Reason, ProgressAt: l.ProgressAt}
	v.TTLMs, v.TTLExtraNs = splitMs(l.TTL)
	return json.Marshal(v)
}

// UnmarshalJSON decodes what MarshalJSON encodes.
func (l *Lease) UnmarshalJSON(b []byte) error {
	var v leaseJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*l = Lease{TaskID: v.TaskID, WorkerID: v.WorkerID, SessionID: v.SessionID, Epoch: v.Epoch,
		AcquiredAt: v.AcquiredAt, ExpiresAt: v.ExpiresAt, HeartbeatAt: v.HeartbeatAt, Status: v.Status,
		StatusAt: v.StatusAt, Reason: v.Reason, ProgressAt: v.ProgressAt, TTL: joinMs(v.TTLMs, v.TTLExtraNs)}
	l.SetID(v.LeaseID)
	return nil
}

// MarshalJSON encodes the task with its TTL and heartbeat interval in
// milliseconds.
func (t Task) MarshalJSON() ([]byte, error) {
	v := taskJSON{ID: t.ID, Profile: t.Profile, Priority: t.Priority, Payload: t.Payload, State: t.State,
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, ClaimableAt: t.ClaimableAt, Attempts: t.Attempts,
		MaxEpoch: t.MaxEpoch, Lease: t.Lease, Checkpoint: t.Checkpoint, Owner: t.Owner}
	if m := t.more; m != nil {
		v.History, v.WaitDeadline, v.Signal, v.Result, v.Reason, v.Journal = m.History, m.WaitDeadline, m.Signal, m.Result, m.Reason, m.Journal
	}
	v.TTLMs, v.TTLExtraNs = splitMs(t.TTL)
	v.HeartbeatMs, v.HeartbeatExtraNs = splitMs(t.Heartbeat)
	return json.Marshal(v)
}

// UnmarshalJSON decodes what MarshalJSON encodes.
func (t *Task) UnmarshalJSON(b []byte) error {
	var v taskJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*t = Task{ID: v.ID, Profile: v.Profile, Priority: v.Priority, Payload: v.Payload, State: v.State,
		CreatedAt: v.CreatedAt, UpdatedAt: v.UpdatedAt, ClaimableAt: v.ClaimableAt, Attempts: v.Attempts,
		MaxEpoch: v.MaxEpoch, Lease: v.Lease, Checkpoint: v.Checkpoint, Owner: v.Owner}
	m := TaskMore{History: v.History, WaitDeadline: v.WaitDeadline, Signal: v.Signal, Result: v.Result, Reason: v.Reason, Journal: v.Journal}
	if m.History != nil || m.WaitDeadline != 0 || m.Signal != nil || m.Result != nil || m.Reason != "" || m.Journal != nil {
		t.more = &m
	}
	t.TTL = joinMs(v.TTLMs, v.TTLExtraNs)
	t.Heartbeat = joinMs(v.HeartbeatMs, v.HeartbeatExtraNs)
	return nil
}
