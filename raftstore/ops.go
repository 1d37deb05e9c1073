package raftstore

import (
	"context"
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
	err = modelErr(cmd.Op, res)
	s.observeConflict(cmd, res, err)
	return res, err
}

// The methods below validate a request and build its command through
// s.cmds (commands.go), the mapping the test double shares, then run it.

// OpenSession opens (or idempotently re-opens) a worker's session,
// generating its id when the request has none.
func (s *Store) OpenSession(ctx context.Context, rid string, req api.OpenSessionRequest) (api.Session, error) {
	cmd, err := s.cmds.OpenSession(rid, req)
	if err != nil {
		return api.Session{}, err
	}
	if _, err := s.run(ctx, rid, cmd); err != nil {
		return api.Session{}, err
	}
	s.lessor.touchSession(cmd.SessionID, cmd.Time)
	return api.Session{SessionID: cmd.SessionID, WorkerID: req.WorkerID}, nil
}

// CloseSession closes a session; its active leases are given back.
func (s *Store) CloseSession(ctx context.Context, rid, sessionID string) error {
	cmd, err := s.cmds.CloseSession(sessionID)
	if err != nil {
		return err
	}
	// The lessor's entry for the session is dropped by the expiry loop's
	// sweep, which reads the model: dropping it here, after the apply,
	// could wipe a renewal of the same id opened again meanwhile.
	res, err := s.run(ctx, rid, cmd)
	if err == nil && !res.Duplicate {
		for i := range res.Released {
			s.observeEnd(lease.Result{Lease: &res.Released[i]})
		}
	}
	return err
}

// runTask runs a built command (or returns the error building it gave)
// and returns the task.
func (s *Store) runTask(ctx context.Context, rid string, cmd *lease.Command, err error) (*lease.Task, error) {
	if err != nil {
		return nil, err
	}
	res, err := s.run(ctx, rid, cmd)
	return res.Task, err
}

// CreateTask creates a pending task with its profile's TTL and heartbeat.
func (s *Store) CreateTask(ctx context.Context, rid string, req api.CreateTaskRequest) (*lease.Task, error) {
	cmd, err := s.cmds.CreateTask(req)
	return s.runTask(ctx, rid, cmd, err)
}

// Acquire grants the named task to a session (creating it first with
// Create). A retry by the same holder returns the same lease.
func (s *Store) Acquire(ctx context.Context, rid, taskID string, req api.AcquireRequest) (api.Grant, error) {
	cmd, err := s.cmds.Acquire(taskID, req)
	if err != nil {
		return api.Grant{}, err
	}
	return s.grant(ctx, rid, cmd)
}

// Claim grants the most urgent claimable task to a session.
func (s *Store) Claim(ctx context.Context, rid string, req api.ClaimRequest) (api.Grant, error) {
	cmd, err := s.cmds.Claim(req)
	if err != nil {
		return api.Grant{}, err
	}
	return s.grant(ctx, rid, cmd)
}

// grant runs an acquire or claim and builds the Grant: the lease, the task
// with its checkpoint, the signed token and the in-doubt effects.
func (s *Store) grant(ctx context.Context, rid string, cmd *lease.Command) (api.Grant, error) {
	res, err := s.run(ctx, rid, cmd)
	if err != nil {
		return api.Grant{}, err
	}
	if res.Lease == nil || res.Task == nil {
		return api.Grant{}, fmt.Errorf("raftstore: %s: grant result without a lease", cmd.Op)
	}
	t, l := res.Task, *res.Lease
	if !res.Duplicate && l.Epoch == t.MaxEpoch && len(t.History()) > 0 &&
		t.History()[len(t.History())-1].Status == lease.StatusReclaimed && l.AcquiredAt.Equal(lease.StampOf(cmd.Time)) {
		s.m.resumed.Inc()
	}
	g := api.Grant{
		Lease: l, Task: *t, ValidForMs: l.TTL.Milliseconds(), HeartbeatMs: t.Heartbeat.Milliseconds(),
		TokenSignature: s.signToken(t.ID, l.Epoch, l.WorkerID),
	}
	for _, e := range t.Journal() {
		if e.State == lease.EffectInDoubt {
			g.InDoubt = append(g.InDoubt, e)
		}
	}
	return g, nil
}

// Checkpoint records progress under the caller's epoch; once it returns,
// the checkpoint survives failover, restart and snapshot restore (I5).
func (s *Store) Checkpoint(ctx context.Context, rid, taskID string, req api.CheckpointRequest) (*lease.Task, error) {
	cmd, err := s.cmds.Checkpoint(taskID, req)
	t, err := s.runTask(ctx, rid, cmd, err)
	if err == nil {
		// A checkpoint is progress (DESIGN.md 13); this node applied it
		// as leader, so its lessor is the one that judges stalls.
		s.lessor.progressed(leaseKey{taskID, req.Epoch}, cmd.Time)
	}
	return t, err
}

// Wait closes the caller's lease and parks the task until a signal or,
// with TimeoutMs, the deadline (the leader signals it then).
func (s *Store) Wait(ctx context.Context, rid, taskID string, req api.WaitRequest) (*lease.Task, error) {
	cmd, err := s.cmds.Wait(taskID, req, s.clock.Now())
	return s.runEnding(ctx, rid, cmd, err)
}

// Signal wakes a waiting task; it becomes claimable with the payload.
func (s *Store) Signal(ctx context.Context, rid, taskID string, req api.SignalRequest) (*lease.Task, error) {
	cmd, err := s.cmds.Signal(taskID, req)
	if err != nil {
		return nil, err
	}
	res, err := s.run(ctx, rid, cmd)
	s.observeSignal(cmd, res)
	return res.Task, err
}

// Release ends the caller's lease as completed, failed or given back.
func (s *Store) Release(ctx context.Context, rid, taskID string, req api.ReleaseRequest) (*lease.Task, error) {
	cmd, err := s.cmds.Release(taskID, req)
	return s.runEnding(ctx, rid, cmd, err)
}

// Revoke takes the live lease away (Epoch 0: whatever lease is live).
func (s *Store) Revoke(ctx context.Context, rid, taskID string, req api.RevokeRequest) (*lease.Task, error) {
	cmd, err := s.cmds.Revoke(taskID, req)
	return s.runEnding(ctx, rid, cmd, err)
}

// Cancel cancels a task for good, revoking its live lease.
func (s *Store) Cancel(ctx context.Context, rid, taskID string, req api.CancelRequest) (*lease.Task, error) {
	cmd, err := s.cmds.Cancel(taskID, req)
	return s.runEnding(ctx, rid, cmd, err)
}

// DeleteTask deletes a completed, failed or cancelled task. Its epochs are
// never reused: a re-created task's grants get later raft indexes.
func (s *Store) DeleteTask(ctx context.Context, rid, taskID string) error {
	cmd, err := s.cmds.DeleteTask(taskID)
	_, err = s.runTask(ctx, rid, cmd, err)
	return err
}

// Intent journals a write before it is made; it commits only while the
// caller's epoch is current and active. Replay is set when the key is done
// and Effect holds the recorded response.
func (s *Store) Intent(ctx context.Context, rid, taskID string, req api.IntentRequest) (api.IntentResponse, error) {
	cmd, err := s.cmds.Intent(taskID, req, s.clock.Now())
	if err != nil {
		return api.IntentResponse{}, err
	}
	res, err := s.run(ctx, rid, cmd)
	if err != nil {
		return api.IntentResponse{}, err
	}
	return IntentReply(res)
}

// Outcome records what a journaled write returned.
func (s *Store) Outcome(ctx context.Context, rid, taskID, key string, req api.OutcomeRequest) (lease.Effect, error) {
	cmd, err := s.cmds.Outcome(taskID, key, req)
	if err != nil {
		return lease.Effect{}, err
	}
	res, err := s.run(ctx, rid, cmd)
	if err != nil {
		return lease.Effect{}, err
	}
	return OutcomeReply(res)
}
