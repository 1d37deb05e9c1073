package raftstore

import (
	"context"
	"fmt"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

// entryBlocked carries a sidecar's report of writes it blocked itself
// (api.BlockedReport). It changes no lease state, only the history every
// member derives, so it is ignorable: a member of an earlier release,
// which does not know it, skips it with a warning instead of halting,
// and a mixed-version cluster stays up while it is rolled (DESIGN.md 15).
const entryBlocked = 6 | ignorableFlag

// blockedEntry is entryBlocked's body: the report, whom it came from and
// the leader's time.
type blockedEntry struct {
	Time   time.Time         `json:"time"`
	TaskID string            `json:"taskId"`
	By     string            `json:"by,omitempty"`
	Report api.BlockedReport `json:"report"`
}

// ReportBlocked records a sidecar's report of the writes for taskID it
// blocked for want of a current lease, so the task's history (the
// console's timeline) shows calls that never reached the cluster or a
// fenced service, with their trace id. It is accepted only from the
// identity that opened the report's session (lease.ErrNotOwner), while
// that session is open (lease.ErrSessionNotFound), and only when the
// session held the task's lease at the report's epoch
// (lease.ErrNotHolder): a sidecar speaks of its own leases only.
func (s *Store) ReportBlocked(ctx context.Context, taskID string, r api.BlockedReport) error {
	if err := s.cmds.checkTaskID(taskID); err != nil {
		return err
	}
	if err := r.Check(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	var err error
	s.fsm.read(func(m *lease.Model) {
		if owner, ok := m.SessionOwner(r.SessionID); !ok {
			err = fmt.Errorf("raftstore: session %q: %w", r.SessionID, lease.ErrSessionNotFound)
		} else if c := callerOf(ctx); c.Owner != "" && owner != "" && owner != c.Owner {
			err = fmt.Errorf("raftstore: session %q: %w", r.SessionID, lease.ErrNotOwner)
		} else {
			err = heldAt(m, taskID, r.Epoch, r.SessionID)
		}
	})
	if err != nil {
		return err
	}
	_, err = s.applyEntry(ctx, entryBlocked, blockedEntry{Time: s.clock.Now(), TaskID: taskID, By: callerOf(ctx).Owner, Report: r})
	return err
}

// heldAt checks that session sid held the task's lease at epoch: the
// current lease or one in the task's lease history.
func heldAt(m *lease.Model, taskID string, epoch uint64, sid string) error {
	t, ok := m.Task(taskID)
	if !ok {
		return fmt.Errorf("raftstore: task %q: %w", taskID, lease.ErrTaskNotFound)
	}
	if l := t.Lease; l != nil && l.Epoch == epoch && l.SessionID == sid {
		return nil
	}
	for i := range t.History() {
		if t.History()[i].Epoch == epoch && t.History()[i].SessionID == sid {
			return nil
		}
	}
	return fmt.Errorf("raftstore: task %q epoch %d: %w", taskID, epoch, lease.ErrNotHolder)
}

// applyBlocked records the report on the history; the lease model is not
// touched, so the replicated state is the same on members that skip it.
func applyBlocked(f *fsm, index uint64, body []byte) (any, error) {
	var b blockedEntry
	if err := decodeBody(body, &b); err != nil {
		return nil, err
	}
	r := b.Report
	f.history.add([]api.HistoryEvent{{Index: index, Time: b.Time, Kind: api.EventBlocked, TaskID: b.TaskID,
		Epoch: r.Epoch, SessionID: r.SessionID, Reason: r.Reason, By: b.By, Method: r.Method, URL: r.URL,
		Count: r.Count, TraceID: r.TraceID}}, false)
	return nil, nil
}
