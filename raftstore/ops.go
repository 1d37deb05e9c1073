package raftstore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

// Every mutation takes a request id (rid). It goes into Command.RequestID;
// the model de-duplicates on it, so retrying after ErrTimeout with the
// same rid has the effect once. An empty rid disables de-duplication.

func checkRID(rid string) error {
	if rid != "" && !validID(rid, maxKeyBytes) {
		return invalid("request id must be at most %d bytes of UTF-8 without control characters", maxKeyBytes)
	}
	return nil
}

// modelErr wraps a model error so callers can test it with errors.Is.
func modelErr(op lease.Op, res lease.Result) error {
	if res.Err == nil {
		return nil
	}
	e := &ModelError{Op: op, Err: res.Err}
	if res.Task != nil {
		e.Epoch = res.Task.MaxEpoch
	}
	return e
}

// run proposes cmd and returns the result, with the model's error wrapped.
func (s *Store) run(ctx context.Context, rid string, cmd *lease.Command) (lease.Result, error) {
	if err := checkRID(rid); err != nil {
		return lease.Result{}, err
	}
	cmd.RequestID = rid
	s.stampCaller(ctx, cmd)
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	if err := s.waitOffice(ctx); err != nil {
		return lease.Result{}, err
	}
	res, err := s.propose(ctx, cmd)
	if err != nil {
		return res, err
	}
	return res, modelErr(cmd.Op, res)
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

// OpenSession opens (or idempotently re-opens) a worker's session,
// generating its id when the request has none.
func (s *Store) OpenSession(ctx context.Context, rid string, req api.OpenSessionRequest) (api.Session, error) {
	if !validID(req.WorkerID, maxWorkerIDBytes) {
		return api.Session{}, invalid("workerId must be 1..%d bytes of UTF-8 without control characters", maxWorkerIDBytes)
	}
	sid := req.SessionID
	if sid == "" {
		sid = sessionIDFor(rid)
	} else if err := checkSessionID(sid); err != nil {
		return api.Session{}, err
	}
	cmd := &lease.Command{Op: lease.OpOpenSession, SessionID: sid, WorkerID: req.WorkerID}
	if _, err := s.run(ctx, rid, cmd); err != nil {
		return api.Session{}, err
	}
	s.lessor.touchSession(sid, cmd.Time)
	return api.Session{SessionID: sid, WorkerID: req.WorkerID}, nil
}

// CloseSession closes a session; its active leases are given back.
func (s *Store) CloseSession(ctx context.Context, rid, sessionID string) error {
	if err := checkSessionID(sessionID); err != nil {
		return err
	}
	// The lessor's entry for the session is dropped by the expiry loop's
	// sweep, which reads the model: dropping it here, after the apply,
	// could wipe a renewal of the same id opened again meanwhile.
	_, err := s.run(ctx, rid, &lease.Command{Op: lease.OpCloseSession, SessionID: sessionID})
	return err
}

// CreateTask creates a pending task with its profile's TTL and heartbeat.
func (s *Store) CreateTask(ctx context.Context, rid string, req api.CreateTaskRequest) (*lease.Task, error) {
	if err := s.checkTaskID(req.TaskID); err != nil {
		return nil, err
	}
	if err := checkPriority(req.Priority); err != nil {
		return nil, err
	}
	name, p, err := s.profile(req.Profile)
	if err != nil {
		return nil, err
	}
	if err := s.checkBytes("payload", req.Payload, s.cfg.MaxPayloadBytes); err != nil {
		return nil, err
	}
	res, err := s.run(ctx, rid, &lease.Command{Op: lease.OpCreateTask, TaskID: req.TaskID, Profile: name,
		TTL: p.TTL, Heartbeat: p.Heartbeat, Priority: req.Priority, Payload: req.Payload})
	if err != nil {
		return res.Task, err
	}
	return res.Task, nil
}

// Acquire grants the named task to a session (creating it first with
// Create). A retry by the same holder returns the same lease.
func (s *Store) Acquire(ctx context.Context, rid, taskID string, req api.AcquireRequest) (api.Grant, error) {
	if err := s.checkTaskID(taskID); err != nil {
		return api.Grant{}, err
	}
	if err := checkSessionID(req.SessionID); err != nil {
		return api.Grant{}, err
	}
	cmd := &lease.Command{Op: lease.OpAcquire, TaskID: taskID, SessionID: req.SessionID}
	if req.Create {
		if err := checkPriority(req.Priority); err != nil {
			return api.Grant{}, err
		}
		name, p, err := s.profile(req.Profile)
		if err != nil {
			return api.Grant{}, err
		}
		cmd.Create, cmd.Profile, cmd.TTL, cmd.Heartbeat, cmd.Priority = true, name, p.TTL, p.Heartbeat, req.Priority
	}
	return s.grant(ctx, rid, cmd)
}

// Claim grants the most urgent claimable task to a session.
func (s *Store) Claim(ctx context.Context, rid string, req api.ClaimRequest) (api.Grant, error) {
	if err := checkSessionID(req.SessionID); err != nil {
		return api.Grant{}, err
	}
	return s.grant(ctx, rid, &lease.Command{Op: lease.OpClaim, SessionID: req.SessionID})
}

// grant runs an acquire or claim and builds the Grant: the lease, the task
// with its checkpoint, the signed token and the in-doubt effects.
func (s *Store) grant(ctx context.Context, rid string, cmd *lease.Command) (api.Grant, error) {
	res, err := s.run(ctx, rid, cmd)
	if err != nil {
		// Two sidecars claiming one task: count it unless the "other"
		// holder is the same session (its own suspect lease).
		if errors.Is(err, lease.ErrLeaseHeld) && (res.Task == nil || res.Task.Lease == nil || res.Task.Lease.SessionID != cmd.SessionID) {
			s.m.alarms.WithLabelValues("acquire_held").Inc()
		}
		return api.Grant{}, err
	}
	if res.Lease == nil || res.Task == nil {
		return api.Grant{}, fmt.Errorf("raftstore: %s: grant result without a lease", cmd.Op)
	}
	t, l := res.Task, *res.Lease
	if !res.Duplicate && l.Epoch == t.MaxEpoch && len(t.History) > 0 &&
		t.History[len(t.History)-1].Status == lease.StatusReclaimed && l.AcquiredAt.Equal(cmd.Time) {
		s.m.resumed.Inc()
	}
	g := api.Grant{
		Lease: l, Task: *t, ValidForMs: l.TTL.Milliseconds(), HeartbeatMs: t.Heartbeat.Milliseconds(),
		TokenSignature: s.signToken(t.ID, l.Epoch, l.WorkerID),
	}
	for _, e := range t.Journal {
		if e.State == lease.EffectInDoubt {
			g.InDoubt = append(g.InDoubt, e)
		}
	}
	return g, nil
}

// Checkpoint records progress under the caller's epoch; once it returns,
// the checkpoint survives failover, restart and snapshot restore (I5).
func (s *Store) Checkpoint(ctx context.Context, rid, taskID string, req api.CheckpointRequest) (*lease.Task, error) {
	if err := s.holderArgs(taskID, req.SessionID, req.Epoch); err != nil {
		return nil, err
	}
	if err := lease.CheckCheckpointSeq(req.Seq); err != nil {
		return nil, err
	}
	if err := checkText("step", req.Step, maxStepBytes); err != nil {
		return nil, err
	}
	if err := s.checkBytes("checkpoint data", req.Data, s.cfg.CheckpointMaxBytes); err != nil {
		return nil, err
	}
	res, err := s.run(ctx, rid, &lease.Command{Op: lease.OpCheckpoint, TaskID: taskID, SessionID: req.SessionID,
		Epoch: req.Epoch, Seq: req.Seq, Step: req.Step, Data: req.Data})
	return res.Task, err
}

func (s *Store) holderArgs(taskID, sessionID string, epoch uint64) error {
	if err := s.checkTaskID(taskID); err != nil {
		return err
	}
	if err := checkSessionID(sessionID); err != nil {
		return err
	}
	return checkEpoch(epoch)
}

// Wait closes the caller's lease and parks the task until a signal or,
// with TimeoutMs, the deadline (the leader signals it then).
func (s *Store) Wait(ctx context.Context, rid, taskID string, req api.WaitRequest) (*lease.Task, error) {
	if err := s.holderArgs(taskID, req.SessionID, req.Epoch); err != nil {
		return nil, err
	}
	d, err := s.checkDurationMs("timeoutMs", req.TimeoutMs, true)
	if err != nil {
		return nil, err
	}
	if err := checkText("reason", req.Reason, maxReasonBytes); err != nil {
		return nil, err
	}
	cmd := &lease.Command{Op: lease.OpWait, TaskID: taskID, SessionID: req.SessionID, Epoch: req.Epoch, Reason: req.Reason}
	cmd.Time = s.clock.Now()
	if d > 0 {
		cmd.Deadline = cmd.Time.Add(d)
	}
	res, err := s.run(ctx, rid, cmd)
	return res.Task, err
}

// Signal wakes a waiting task; it becomes claimable with the payload.
func (s *Store) Signal(ctx context.Context, rid, taskID string, req api.SignalRequest) (*lease.Task, error) {
	if err := s.checkTaskID(taskID); err != nil {
		return nil, err
	}
	if err := s.checkBytes("payload", req.Payload, s.cfg.MaxPayloadBytes); err != nil {
		return nil, err
	}
	if err := checkText("reason", req.Reason, maxReasonBytes); err != nil {
		return nil, err
	}
	cmd := &lease.Command{Op: lease.OpSignal, TaskID: taskID, Payload: req.Payload, Reason: req.Reason}
	res, err := s.run(ctx, rid, cmd)
	s.observeSignal(cmd, res)
	return res.Task, err
}

// Release ends the caller's lease as completed, failed or given back.
func (s *Store) Release(ctx context.Context, rid, taskID string, req api.ReleaseRequest) (*lease.Task, error) {
	if err := s.holderArgs(taskID, req.SessionID, req.Epoch); err != nil {
		return nil, err
	}
	if err := checkOutcome(req.Outcome); err != nil {
		return nil, err
	}
	if err := s.checkBytes("result", req.Result, s.cfg.MaxPayloadBytes); err != nil {
		return nil, err
	}
	if err := checkText("reason", req.Reason, maxReasonBytes); err != nil {
		return nil, err
	}
	res, err := s.run(ctx, rid, &lease.Command{Op: lease.OpRelease, TaskID: taskID, SessionID: req.SessionID,
		Epoch: req.Epoch, Outcome: req.Outcome, Result: req.Result, Reason: req.Reason})
	return res.Task, err
}

// Revoke takes the live lease away (Epoch 0: whatever lease is live).
func (s *Store) Revoke(ctx context.Context, rid, taskID string, req api.RevokeRequest) (*lease.Task, error) {
	if err := s.checkTaskID(taskID); err != nil {
		return nil, err
	}
	if err := checkText("reason", req.Reason, maxReasonBytes); err != nil {
		return nil, err
	}
	res, err := s.run(ctx, rid, &lease.Command{Op: lease.OpRevoke, TaskID: taskID, Epoch: req.Epoch, Reason: req.Reason})
	return res.Task, err
}

// Cancel cancels a task for good, revoking its live lease.
func (s *Store) Cancel(ctx context.Context, rid, taskID string, req api.CancelRequest) (*lease.Task, error) {
	if err := s.checkTaskID(taskID); err != nil {
		return nil, err
	}
	if err := checkText("reason", req.Reason, maxReasonBytes); err != nil {
		return nil, err
	}
	res, err := s.run(ctx, rid, &lease.Command{Op: lease.OpCancel, TaskID: taskID, Reason: req.Reason})
	return res.Task, err
}

// DeleteTask deletes a completed, failed or cancelled task. Its epochs are
// never reused: a re-created task's grants get later raft indexes.
func (s *Store) DeleteTask(ctx context.Context, rid, taskID string) error {
	if err := s.checkTaskID(taskID); err != nil {
		return err
	}
	_, err := s.run(ctx, rid, &lease.Command{Op: lease.OpDeleteTask, TaskID: taskID})
	return err
}

// Intent journals a write before it is made; it commits only while the
// caller's epoch is current and active. Replay is set when the key is done
// and Effect holds the recorded response.
func (s *Store) Intent(ctx context.Context, rid, taskID string, req api.IntentRequest) (api.IntentResponse, error) {
	if err := s.holderArgs(taskID, req.SessionID, req.Epoch); err != nil {
		return api.IntentResponse{}, err
	}
	if !validID(req.Key, maxKeyBytes) {
		return api.IntentResponse{}, invalid("key must be 1..%d bytes of UTF-8 without control characters", maxKeyBytes)
	}
	if req.Method == "" || len(req.Method) > maxMethodBytes || !validID(req.Method, maxMethodBytes) {
		return api.IntentResponse{}, invalid("method must be 1..%d bytes", maxMethodBytes)
	}
	if err := checkText("url", req.URL, maxURLBytes); err != nil {
		return api.IntentResponse{}, err
	}
	if err := checkText("bodyDigest", req.BodyDigest, maxDigestBytes); err != nil {
		return api.IntentResponse{}, err
	}
	d, err := s.checkDurationMs("deadlineMs", req.DeadlineMs, false)
	if err != nil {
		return api.IntentResponse{}, err
	}
	cmd := &lease.Command{Op: lease.OpIntent, TaskID: taskID, SessionID: req.SessionID, Epoch: req.Epoch}
	cmd.Time = s.clock.Now()
	cmd.Effect = &lease.Effect{Key: req.Key, Method: req.Method, URL: req.URL, BodyDigest: req.BodyDigest, Deadline: cmd.Time.Add(d)}
	res, err := s.run(ctx, rid, cmd)
	if err != nil {
		return api.IntentResponse{}, err
	}
	if res.Effect == nil {
		return api.IntentResponse{}, fmt.Errorf("raftstore: intent result without an effect")
	}
	return api.IntentResponse{Effect: *res.Effect, Replay: res.Effect.State == lease.EffectDone}, nil
}

// Outcome records what a journaled write returned.
func (s *Store) Outcome(ctx context.Context, rid, taskID, key string, req api.OutcomeRequest) (lease.Effect, error) {
	if err := s.checkTaskID(taskID); err != nil {
		return lease.Effect{}, err
	}
	if !validID(key, maxKeyBytes) {
		return lease.Effect{}, invalid("key must be 1..%d bytes of UTF-8 without control characters", maxKeyBytes)
	}
	if err := checkEpoch(req.Epoch); err != nil {
		return lease.Effect{}, err
	}
	if req.Status < 100 || req.Status > 599 {
		return lease.Effect{}, invalid("status must be an HTTP status code, not %d", req.Status)
	}
	if n := headerSize(req.Header); n > maxHeaderBytes {
		return lease.Effect{}, tooLarge("header", n, maxHeaderBytes)
	}
	if err := s.checkBytes("body", req.Body, s.cfg.MaxPayloadBytes); err != nil {
		return lease.Effect{}, err
	}
	res, err := s.run(ctx, rid, &lease.Command{Op: lease.OpOutcome, TaskID: taskID, Epoch: req.Epoch,
		Effect: &lease.Effect{Key: key, Status: req.Status, Header: req.Header, Body: req.Body}})
	if err != nil {
		return lease.Effect{}, err
	}
	if res.Effect == nil {
		return lease.Effect{}, fmt.Errorf("raftstore: outcome result without an effect")
	}
	return *res.Effect, nil
}
