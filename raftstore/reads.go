package raftstore

import (
	"context"
	"fmt"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

// MaxListLimit bounds one page of Tasks; the API refuses a larger ?limit=.
const MaxListLimit = 1000

// linearize makes the next local read linearizable (the ReadIndex recipe,
// as rqlite's waitForLinearizableRead): note the commit index, confirm
// leadership with a VerifyLeader round begun after that (batched with
// heartbeats), then wait until the FSM applied the noted index. The leader
// took office with a committed entry of its own term, so the commit index
// covers every write acknowledged before the read began.
func (s *Store) linearize(ctx context.Context) error {
	if err := s.waitOffice(ctx); err != nil {
		return err
	}
	idx := s.raft.CommitIndex()
	if err := s.verify.wait(ctx); err != nil {
		return err
	}
	if err := s.fsm.applied.wait(ctx, idx); err != nil {
		return fmt.Errorf("%w: waiting to apply index %d: %v", ErrTimeout, idx, err)
	}
	return nil
}

func (s *Store) readCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.cfg.ApplyTimeout)
}

// overlay replaces a lease's replicated ExpiresAt and HeartbeatAt with the
// leader's in-memory view (renewals are not replicated), and adds the
// leader's ProgressAt (progress marks are not replicated either).
func (s *Store) overlay(l *lease.Lease) {
	if l == nil || !l.Status.Live() || !s.IsLeader() {
		return
	}
	if d := s.lessor.deadline(*l); !d.IsZero() {
		l.ExpiresAt = lease.StampOf(d)
	}
	if hb, ok := s.lessor.lastHeartbeat(l.SessionID); ok && hb.After(l.HeartbeatAt.Time()) {
		l.HeartbeatAt = lease.StampOf(hb)
	}
	l.ProgressAt = lease.StampOf(s.lessor.progressAt(*l))
}

// Task returns one task; linearizable unless stale.
func (s *Store) Task(ctx context.Context, taskID string, stale bool) (*lease.Task, error) {
	if err := s.cmds.checkTaskID(taskID); err != nil {
		return nil, err
	}
	if !stale {
		ctx, cancel := s.readCtx(ctx)
		defer cancel()
		if err := s.linearize(ctx); err != nil {
			return nil, err
		}
	}
	var (
		t  *lease.Task
		ok bool
	)
	s.fsm.read(func(m *lease.Model) { t, ok = m.Task(taskID) })
	if !ok {
		return nil, fmt.Errorf("raftstore: task %q: %w", taskID, lease.ErrTaskNotFound)
	}
	s.overlay(t.Lease)
	return t, nil
}

// Tasks lists tasks matching f, ordered by id, at most 1000 per page;
// Next is set when there may be more. Linearizable unless stale.
func (s *Store) Tasks(ctx context.Context, f lease.TaskFilter, stale bool) (api.TaskList, error) {
	if f.Limit <= 0 || f.Limit > MaxListLimit {
		f.Limit = MaxListLimit
	}
	if !stale {
		ctx, cancel := s.readCtx(ctx)
		defer cancel()
		if err := s.linearize(ctx); err != nil {
			return api.TaskList{}, err
		}
	}
	var ts []*lease.Task
	s.fsm.read(func(m *lease.Model) { ts = m.Tasks(f) })
	out := api.TaskList{Tasks: ts}
	if out.Tasks == nil {
		out.Tasks = []*lease.Task{}
	}
	for _, t := range ts {
		s.overlay(t.Lease)
	}
	if len(ts) == f.Limit {
		out.Next = ts[len(ts)-1].ID
	}
	return out, nil
}

// Leases lists the live leases (active, suspect_dead, expired) of tasks
// after p.After, ordered by task id, at most MaxListLimit per page (Next is
// set when there may be more), with the leader's renewal view overlaid.
// Linearizable unless stale.
func (s *Store) Leases(ctx context.Context, p api.LeasePage, stale bool) (api.LeaseList, error) {
	if p.Limit <= 0 || p.Limit > MaxListLimit {
		p.Limit = MaxListLimit
	}
	if !stale {
		ctx, cancel := s.readCtx(ctx)
		defer cancel()
		if err := s.linearize(ctx); err != nil {
			return api.LeaseList{}, err
		}
	}
	var ls []lease.Lease
	s.fsm.read(func(m *lease.Model) { ls = m.LiveLeasesPage(p.After, p.Limit) })
	if ls == nil {
		ls = []lease.Lease{}
	}
	for i := range ls {
		s.overlay(&ls[i])
	}
	out := api.LeaseList{Leases: ls}
	if len(ls) == p.Limit {
		out.Next = ls[len(ls)-1].TaskID
	}
	return out, nil
}

// StateHash returns a digest of this replica's replicated state; replicas
// that applied the same log return the same hash (tests compare them).
func (s *Store) StateHash() [32]byte { return s.fsm.StateHash() }

// AppliedIndex returns the last raft index applied to this replica's FSM.
func (s *Store) AppliedIndex() uint64 { return s.fsm.applied.get() }

// timeout is the raft call timeout derived from ctx.
func (s *Store) timeout(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		if d := time.Until(dl); d > 0 {
			return d
		}
		return time.Millisecond
	}
	return s.cfg.ApplyTimeout
}
