package raftstore

import (
	"context"

	"github.com/fencepost/fencepost/fence/lease"
	"go.uber.org/zap"
)

// Lease ends are counted and logged on the leader, where they are
// proposed (metrics.go), once per lease: by reason, so a dashboard tells a
// worker's death (worker_exited, worker_unhealthy), a stuck run (stalled)
// and a dead sidecar (expired) apart (DESIGN.md 17).

// runEnding runs a command that may end a lease (release, wait, revoke,
// cancel) and observes the end.
func (s *Store) runEnding(ctx context.Context, rid string, cmd *lease.Command, err error) (*lease.Task, error) {
	if err != nil {
		return nil, err
	}
	res, err := s.run(ctx, rid, cmd)
	if err == nil && !res.Duplicate {
		s.observeEnd(res)
	}
	return res.Task, err
}

// observeEnd counts and logs the lease res ended, if it ended one.
func (s *Store) observeEnd(res lease.Result) {
	l := res.Lease
	if res.Err != nil || l == nil || l.Status.Live() || l.Status == lease.StatusActive {
		return
	}
	var outcome lease.Outcome
	if res.Task != nil && l.Status == lease.StatusReleased {
		switch res.Task.State {
		case lease.TaskCompleted:
			outcome = lease.OutcomeCompleted
		case lease.TaskFailed:
			outcome = lease.OutcomeFailed
		default:
			outcome = lease.OutcomeGivenBack
		}
	}
	why := lease.EndReason(l.Status, outcome, l.Reason)
	s.m.leaseEnds.WithLabelValues(why).Inc()
	if why == lease.ReasonStalled && l.Status == lease.StatusReclaimed {
		s.m.stalledReclaims.Inc()
	}
	s.log.Info("lease ended", zap.String("task", l.TaskID), zap.Uint64("epoch", l.Epoch),
		zap.String("status", string(l.Status)), zap.String("reason", why), zap.String("detail", l.Reason))
}
