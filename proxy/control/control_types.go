package control

import (
	"encoding/json"

	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/leases"
)

// Control API routes.
const (
	PathAcquire    = "/v1/acquire"
	PathClaim      = "/v1/claim"
	PathCheckpoint = "/v1/checkpoint"
	PathWait       = "/v1/wait"
	PathComplete   = "/v1/complete"
	PathFail       = "/v1/fail"
	PathGiveBack   = "/v1/giveback"
	PathLease      = "/v1/lease"
	PathEvents     = "/v1/events"
	PathCA         = "/v1/ca"     // the interception CA: bundle path, PEM, env (JSON)
	PathCAPEM      = "/v1/ca.pem" // the interception CA certificate alone, PEM
	PathHealth     = "/healthz"
	PathReady      = "/readyz"
	PathMetrics    = "/metrics"
)

// MaxBody bounds a control request (checkpoint data included).
const MaxBody = 4 << 20

// AcquireRequest is the body of POST /v1/acquire.
type AcquireRequest struct {
	// TaskID names the task; required.
	TaskID string `json:"taskId"`
	// Create creates the task when the cluster does not know it.
	Create bool `json:"create,omitempty"`
	// Profile is the profile a created task gets ("" = the cluster's
	// default); only read with Create.
	Profile string `json:"profile,omitempty"`
	// Priority orders a created task among claimable ones.
	Priority int `json:"priority,omitempty"`
}

// GrantReply is the reply to acquire and claim.
type GrantReply struct {
	// Lease is the sidecar's local view of the new lease.
	Lease leases.View `json:"lease"`
	// Task is the task with its latest checkpoint.
	Task lease.Task `json:"task"`
	// CheckpointData repeats the latest checkpoint's data as the JSON
	// value it was given as, when it is one (task.checkpoint.data has the
	// same bytes base64-encoded, as every byte field of the cluster API).
	CheckpointData json.RawMessage `json:"checkpointData,omitempty"`
	// InDoubt lists journaled writes an earlier owner left without an
	// outcome: check them downstream before repeating them.
	InDoubt []*lease.Effect `json:"inDoubt,omitempty"`
}

// CheckpointRequest is the body of POST /v1/checkpoint. TaskID may be
// omitted when one lease is held. Seq 0 (or no seq) means "the next one":
// the cluster assigns the latest seq + 1. Data is any JSON value (object,
// array, string, number, ...); the cluster stores its JSON text as the
// checkpoint's bytes, unchanged.
type CheckpointRequest struct {
	TaskID string          `json:"taskId,omitempty"`
	Seq    uint64          `json:"seq,omitempty"`
	Step   string          `json:"step,omitempty"`
	Data   json.RawMessage `json:"data,omitempty"`
}

// WaitRequest is the body of POST /v1/wait.
type WaitRequest struct {
	TaskID    string `json:"taskId,omitempty"`
	TimeoutMs int64  `json:"timeoutMs,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// ReleaseRequest is the body of POST /v1/complete, /v1/fail and
// /v1/giveback. Result, like checkpoint data, is any JSON value, stored as
// its JSON text.
type ReleaseRequest struct {
	TaskID string          `json:"taskId,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Reason string          `json:"reason,omitempty"`
}

// LeaseReply is the reply to GET /v1/lease.
type LeaseReply struct {
	Leases []leases.View `json:"leases"`
}

// CheckpointReply answers POST /v1/checkpoint: the task with its new
// checkpoint (the fields of lease.Task, as before) and, like GrantReply,
// the checkpoint's data as the JSON value it was given as, so one value
// has one shape in every reply of the control API (task.checkpoint.data
// keeps the cluster API's base64 of the same bytes).
type CheckpointReply struct {
	Task           *lease.Task
	CheckpointData json.RawMessage
}

// MarshalJSON writes the task's own fields (lease.Task has its own
// encoding) with checkpointData beside them.
func (r CheckpointReply) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(r.Task)
	if err != nil || len(r.CheckpointData) == 0 || len(b) < 2 || b[len(b)-1] != '}' {
		return b, err
	}
	out := append(b[:len(b)-1:len(b)-1], `,"checkpointData":`...)
	if len(b) == 2 { // {}
		out = append(b[:1:1], `"checkpointData":`...)
	}
	return append(append(out, r.CheckpointData...), '}'), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *CheckpointReply) UnmarshalJSON(b []byte) error {
	var extra struct {
		CheckpointData json.RawMessage `json:"checkpointData"`
	}
	r.Task = new(lease.Task)
	if err := json.Unmarshal(b, r.Task); err != nil {
		return err
	}
	if err := json.Unmarshal(b, &extra); err != nil {
		return err
	}
	r.CheckpointData = extra.CheckpointData
	return nil
}
