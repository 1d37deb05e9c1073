package raftstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/fencepost/fencepost/fence/lease"
	"go.uber.org/zap"
)

// tickInterval is how often the leader looks for overdue leases: a
// twentieth of the shortest TTL, within [10ms, 1s]. A dead owner's task
// takes three ticks (suspect, expire, reclaim) and three raft rounds past
// its TTL and grace to become claimable; at a tenth of the TTL a loaded
// 3-member cluster overran I7's bound (TTL + grace + election + 1 s).
func (s *Store) tickInterval() time.Duration {
	return min(max(s.cfg.minProfileTTL()/20, 10*time.Millisecond), time.Second)
}

// runExpiry is the leader's expiry loop (etcd's revokeExpiredLeases shape):
// each tick the lessor plans transitions from the committed state and its
// in-memory deadlines; they are proposed in batch entries of up to
// expiryBatchSize (expiry_batch.go), at most ProposalsPerTick entries per
// tick, together (raft pipelines them), and the tick waits for all of
// them, so the next plan sees their effect and nothing is proposed twice.
func (s *Store) runExpiry(ctx context.Context) {
	t := time.NewTicker(s.tickInterval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.expireOnce(ctx)
	}
}

// planExpiry runs the lessor's plan over the committed state.
func (s *Store) planExpiry(now time.Time) []lease.Command {
	limit := s.cfg.ProposalsPerTick * expiryBatchSize
	if s.cfg.MixedVersions {
		limit = s.cfg.ProposalsPerTick // one entry each
	}
	return planFrom(s.fsm, s.lessor, now, limit)
}

// planFrom plans at most limit transitions. The lessor reads the model's
// leases in place, so the plan runs under the FSM's read lock: applies
// wait for one map walk, not for a copy of every lease.
func planFrom(f *fsm, l *lessor, now time.Time, limit int) []lease.Command {
	var cmds []lease.Command
	f.read(func(m *lease.Model) {
		in := expiryInput{Leases: m.LiveScan(), IntentsUntil: m.IntentsUntil, Sessions: m.SessionIDs(), Profile: m.TaskProfile}
		for _, id := range m.WaitingDue(now) {
			if t, ok := m.Task(id); ok && t.Lease != nil {
				if in.Waiting == nil {
					in.Waiting = map[string]uint64{}
				}
				in.Waiting[id] = t.Lease.Epoch
			}
		}
		cmds = l.plan(in, limit)
	})
	return cmds
}

// expireOnce runs one tick; it returns the number of raft entries
// proposed (batches, not transitions).
func (s *Store) expireOnce(ctx context.Context) int {
	cmds := s.planExpiry(s.clock.Now())
	if len(cmds) == 0 {
		return 0
	}
	size := expiryBatchSize
	if s.cfg.MixedVersions {
		size = 1 // see Config.MixedVersions
	}
	runs := batches(cmds, size)
	var wg sync.WaitGroup
	for _, run := range runs {
		wg.Add(1)
		go func(run []lease.Command) {
			defer wg.Done()
			res, err := s.proposeRun(ctx, run)
			if err != nil {
				// The outcome is unknown: close marks stay, and the next
				// tick plans again from the committed state.
				if !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrShutdown) && ctx.Err() == nil {
					s.log.Warn("expiry proposal failed", zap.Int("transitions", len(run)), zap.Error(err))
				}
				return
			}
			done := map[lease.Op]int{}
			for i := range run {
				if run[i].Op == lease.OpCloseSession {
					// Applied or refused: either way no close is in flight.
					s.lessor.closeDone(run[i].SessionID)
				}
				if s.observeExpiry(&run[i], res[i], len(run) == 1) {
					done[run[i].Op]++
				}
			}
			if len(run) > 1 {
				fields := []zap.Field{zap.Int("transitions", len(run))}
				for op, n := range done {
					fields = append(fields, zap.Int(op.String(), n))
				}
				s.log.Info("lease transitions (one raft entry)", fields...)
			}
		}(run)
	}
	wg.Wait()
	return len(runs)
}

// observeExpiry logs and counts what a leader-driven transition did, and
// reports whether it took effect. A transition alone in its entry is
// logged at info; one of a larger batch at debug (the batch logs one
// summary line): a dead session's 100,000 leases would otherwise be
// 300,000 info lines.
func (s *Store) observeExpiry(c *lease.Command, res lease.Result, alone bool) bool {
	if res.Err != nil {
		// Lost a race (the holder heartbeated, released, ...): harmless.
		s.log.Debug("expiry proposal was a no-op", zap.String("op", c.Op.String()),
			zap.String("task", c.TaskID), zap.Error(res.Err))
		return false
	}
	switch c.Op {
	case lease.OpSuspect:
		s.m.suspected.Inc()
	case lease.OpExpire:
		s.m.expired.Inc()
	case lease.OpReclaim:
		s.m.reclaimed.Inc()
		s.m.inDoubt.Add(float64(len(res.InDoubt)))
		s.observeEnd(res)
	case lease.OpSignal:
		s.observeSignal(c, res)
	case lease.OpCloseSession:
		s.m.sessionsClosed.Inc()
	}
	level := zap.DebugLevel
	if alone {
		level = zap.InfoLevel
	}
	s.log.Log(level, "lease transition", zap.String("op", c.Op.String()), zap.String("task", c.TaskID),
		zap.String("session", c.SessionID), zap.Uint64("epoch", c.Epoch))
	return true
}

// observeSignal records how long a task sat in paused_waiting_external.
func (s *Store) observeSignal(c *lease.Command, res lease.Result) {
	if res.Err != nil || res.Duplicate || res.Task == nil || res.Task.Lease == nil {
		return
	}
	if l := res.Task.Lease; l.Status == lease.StatusPausedWaiting && !l.StatusAt.IsZero() {
		s.m.pausedSeconds.Observe(c.Time.Sub(l.StatusAt.Time()).Seconds())
	}
}
