package raftstore

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

// Commands turns API requests into lease commands: each request's
// validation and its mapping onto the model, in one place. The Store
// proposes what it builds through raft; a test double
// (raftstore/httpapi/httpapitest) applies it to a model directly, so the
// two cannot map a request differently. Times a command needs (a wait's
// or an intent's deadline) count from now, the leader's clock.
type Commands struct {
	cfg Config
}

// NewCommands returns the mapping for a store configured with cfg
// (defaults applied).
func NewCommands(cfg Config) *Commands { return &Commands{cfg: cfg.WithDefaults()} }

// OpenSession opens (or idempotently re-opens) a worker's session. Its id
// is the request's, else derived from the request id (a retried open names
// the same session), else random.
func (c *Commands) OpenSession(rid string, req api.OpenSessionRequest) (*lease.Command, error) {
	if !validID(req.WorkerID, maxWorkerIDBytes) {
		return nil, invalid("workerId must be 1..%d bytes of UTF-8 without control characters", maxWorkerIDBytes)
	}
	sid := req.SessionID
	if sid == "" {
		sid = sessionIDFor(rid)
	} else if err := checkSessionID(sid); err != nil {
		return nil, err
	}
	return &lease.Command{Op: lease.OpOpenSession, SessionID: sid, WorkerID: req.WorkerID}, nil
}

// sessionIDFor derives a session id from the request id, so a retried open
// (same rid) names the same session; without a rid it is random.
func sessionIDFor(rid string) string {
	if rid != "" {
		sum := sha256.Sum256([]byte("session\n" + rid))
		return "s-" + hex.EncodeToString(sum[:12])
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "s-" + hex.EncodeToString(b[:])
}

// CloseSession closes a session; its active leases are given back.
func (c *Commands) CloseSession(sessionID string) (*lease.Command, error) {
	if err := checkSessionID(sessionID); err != nil {
		return nil, err
	}
	return &lease.Command{Op: lease.OpCloseSession, SessionID: sessionID}, nil
}

// CreateTask creates a pending task with its profile's TTL and heartbeat.
func (c *Commands) CreateTask(req api.CreateTaskRequest) (*lease.Command, error) {
	if err := c.checkTaskID(req.TaskID); err != nil {
		return nil, err
	}
	if err := checkPriority(req.Priority); err != nil {
		return nil, err
	}
	name, p, err := c.profile(req.Profile)
	if err != nil {
		return nil, err
	}
	if err := c.checkBytes("payload", req.Payload, c.cfg.MaxPayloadBytes); err != nil {
		return nil, err
	}
	return &lease.Command{Op: lease.OpCreateTask, TaskID: req.TaskID, Profile: name,
		TTL: p.TTL, Heartbeat: p.Heartbeat, Priority: req.Priority, Payload: req.Payload}, nil
}

// Acquire grants the named task to a session (creating it first with
// Create).
func (c *Commands) Acquire(taskID string, req api.AcquireRequest) (*lease.Command, error) {
	if err := c.checkTaskID(taskID); err != nil {
		return nil, err
	}
	if err := checkSessionID(req.SessionID); err != nil {
		return nil, err
	}
	cmd := &lease.Command{Op: lease.OpAcquire, TaskID: taskID, SessionID: req.SessionID}
	if req.Create {
		if err := checkPriority(req.Priority); err != nil {
			return nil, err
		}
		name, p, err := c.profile(req.Profile)
		if err != nil {
			return nil, err
		}
		cmd.Create, cmd.Profile, cmd.TTL, cmd.Heartbeat, cmd.Priority = true, name, p.TTL, p.Heartbeat, req.Priority
	}
	return cmd, nil
}

// Claim grants the most urgent claimable task to a session.
func (c *Commands) Claim(req api.ClaimRequest) (*lease.Command, error) {
	if err := checkSessionID(req.SessionID); err != nil {
		return nil, err
	}
	return &lease.Command{Op: lease.OpClaim, SessionID: req.SessionID}, nil
}

// Checkpoint records progress under the caller's epoch.
func (c *Commands) Checkpoint(taskID string, req api.CheckpointRequest) (*lease.Command, error) {
	if err := c.holderArgs(taskID, req.SessionID, req.Epoch); err != nil {
		return nil, err
	}
	if err := lease.CheckCheckpointSeq(req.Seq); err != nil {
		return nil, err
	}
	if err := checkText("step", req.Step, maxStepBytes); err != nil {
		return nil, err
	}
	if err := c.checkBytes("checkpoint data", req.Data, c.cfg.CheckpointMaxBytes); err != nil {
		return nil, err
	}
	return &lease.Command{Op: lease.OpCheckpoint, TaskID: taskID, SessionID: req.SessionID,
		Epoch: req.Epoch, Seq: req.Seq, Step: req.Step, Data: req.Data, SeqWindow: c.seqWindow()}, nil
}

func (c *Commands) holderArgs(taskID, sessionID string, epoch uint64) error {
	if err := c.checkTaskID(taskID); err != nil {
		return err
	}
	if err := checkSessionID(sessionID); err != nil {
		return err
	}
	return checkEpoch(epoch)
}

// Wait closes the caller's lease and parks the task until a signal or,
// with TimeoutMs, the deadline counted from now.
func (c *Commands) Wait(taskID string, req api.WaitRequest, now time.Time) (*lease.Command, error) {
	if err := c.holderArgs(taskID, req.SessionID, req.Epoch); err != nil {
		return nil, err
	}
	d, err := c.checkDurationMs("timeoutMs", req.TimeoutMs, true)
	if err != nil {
		return nil, err
	}
	if err := checkText("reason", req.Reason, maxReasonBytes); err != nil {
		return nil, err
	}
	cmd := &lease.Command{Op: lease.OpWait, TaskID: taskID, SessionID: req.SessionID, Epoch: req.Epoch, Reason: req.Reason, Time: now}
	if d > 0 {
		cmd.Deadline = lease.StampOf(now.Add(d))
	}
	return cmd, nil
}

// Signal wakes a waiting task; it becomes claimable with the payload.
func (c *Commands) Signal(taskID string, req api.SignalRequest) (*lease.Command, error) {
	if err := c.checkTaskID(taskID); err != nil {
		return nil, err
	}
	if err := c.checkBytes("payload", req.Payload, c.cfg.MaxPayloadBytes); err != nil {
		return nil, err
	}
	if err := checkText("reason", req.Reason, maxReasonBytes); err != nil {
		return nil, err
	}
	return &lease.Command{Op: lease.OpSignal, TaskID: taskID, Payload: req.Payload, Reason: req.Reason}, nil
}

// Release ends the caller's lease as completed, failed or given back.
func (c *Commands) Release(taskID string, req api.ReleaseRequest) (*lease.Command, error) {
	if err := c.holderArgs(taskID, req.SessionID, req.Epoch); err != nil {
		return nil, err
	}
	if err := checkOutcome(req.Outcome); err != nil {
		return nil, err
	}
	if err := c.checkBytes("result", req.Result, c.cfg.MaxPayloadBytes); err != nil {
		return nil, err
	}
	if err := checkText("reason", req.Reason, maxReasonBytes); err != nil {
		return nil, err
	}
	return &lease.Command{Op: lease.OpRelease, TaskID: taskID, SessionID: req.SessionID,
		Epoch: req.Epoch, Outcome: req.Outcome, Result: req.Result, Reason: req.Reason}, nil
}

// Revoke takes the live lease away (Epoch 0: whatever lease is live).
func (c *Commands) Revoke(taskID string, req api.RevokeRequest) (*lease.Command, error) {
	if err := c.checkTaskID(taskID); err != nil {
		return nil, err
	}
	if err := checkText("reason", req.Reason, maxReasonBytes); err != nil {
		return nil, err
	}
	return &lease.Command{Op: lease.OpRevoke, TaskID: taskID, Epoch: req.Epoch, Reason: req.Reason}, nil
}

// Cancel cancels a task for good, revoking its live lease.
func (c *Commands) Cancel(taskID string, req api.CancelRequest) (*lease.Command, error) {
	if err := c.checkTaskID(taskID); err != nil {
		return nil, err
	}
	if err := checkText("reason", req.Reason, maxReasonBytes); err != nil {
		return nil, err
	}
	return &lease.Command{Op: lease.OpCancel, TaskID: taskID, Reason: req.Reason}, nil
}

// DeleteTask deletes a completed, failed or cancelled task.
func (c *Commands) DeleteTask(taskID string) (*lease.Command, error) {
	if err := c.checkTaskID(taskID); err != nil {
		return nil, err
	}
	return &lease.Command{Op: lease.OpDeleteTask, TaskID: taskID}, nil
}

// Intent journals a write before it is made; its deadline counts from now.
func (c *Commands) Intent(taskID string, req api.IntentRequest, now time.Time) (*lease.Command, error) {
	if err := c.holderArgs(taskID, req.SessionID, req.Epoch); err != nil {
		return nil, err
	}
	if !validID(req.Key, maxKeyBytes) {
		return nil, invalid("key must be 1..%d bytes of UTF-8 without control characters", maxKeyBytes)
	}
	if req.Method == "" || len(req.Method) > maxMethodBytes || !validID(req.Method, maxMethodBytes) {
		return nil, invalid("method must be 1..%d bytes", maxMethodBytes)
	}
	if err := checkText("url", req.URL, maxURLBytes); err != nil {
		return nil, err
	}
	if err := checkText("bodyDigest", req.BodyDigest, maxDigestBytes); err != nil {
		return nil, err
	}
	d, err := c.checkDurationMs("deadlineMs", req.DeadlineMs, false)
	if err != nil {
		return nil, err
	}
	return &lease.Command{Op: lease.OpIntent, TaskID: taskID, SessionID: req.SessionID, Epoch: req.Epoch, Time: now,
		Effect: &lease.Effect{Key: req.Key, Method: req.Method, URL: req.URL, BodyDigest: req.BodyDigest, Deadline: lease.StampOf(now.Add(d))}}, nil
}

// IntentReply is the reply to an applied intent: Replay is set when the
// key is done and Effect holds the recorded response.
func IntentReply(res lease.Result) (api.IntentResponse, error) {
	if res.Effect == nil {
		return api.IntentResponse{}, fmt.Errorf("raftstore: intent result without an effect")
	}
	return api.IntentResponse{Effect: *res.Effect, Replay: res.Effect.State == lease.EffectDone}, nil
}

// Outcome records what a journaled write returned.
func (c *Commands) Outcome(taskID, key string, req api.OutcomeRequest) (*lease.Command, error) {
	if err := c.checkTaskID(taskID); err != nil {
		return nil, err
	}
	if !validID(key, maxKeyBytes) {
		return nil, invalid("key must be 1..%d bytes of UTF-8 without control characters", maxKeyBytes)
	}
	if err := checkEpoch(req.Epoch); err != nil {
		return nil, err
	}
	if req.Status < 100 || req.Status > 599 {
		return nil, invalid("status must be an HTTP status code, not %d", req.Status)
	}
	if n := headerSize(req.Header); n > maxHeaderBytes {
		return nil, tooLarge("header", n, maxHeaderBytes)
	}
	if err := c.checkBytes("body", req.Body, c.cfg.MaxPayloadBytes); err != nil {
		return nil, err
	}
	return &lease.Command{Op: lease.OpOutcome, TaskID: taskID, Epoch: req.Epoch,
		Effect: &lease.Effect{Key: key, Status: req.Status, Header: req.Header, Body: req.Body}}, nil
}

// OutcomeReply is the reply to an applied outcome: the recorded effect.
func OutcomeReply(res lease.Result) (lease.Effect, error) {
	if res.Effect == nil {
		return lease.Effect{}, fmt.Errorf("raftstore: outcome result without an effect")
	}
	return *res.Effect, nil
}

// seqWindow is the checkpoint seq window stamped into a checkpoint: none
// while members of the previous release may apply it (Config.MixedVersions).
func (c *Commands) seqWindow() uint64 {
	if c.cfg.MixedVersions {
		return 0
	}
	return lease.MaxCheckpointSeqJump
}
