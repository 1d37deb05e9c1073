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
// each tick the lessor plans at most ProposalsPerTick proposals from the
// committed state and its in-memory deadlines; they are proposed together
// (raft pipelines them) and the tick waits for all of them, so the next
// plan sees their effect and nothing is proposed twice.
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

// planExpiry runs the lessor's plan over the committed state. The lessor
// reads the model's leases in place, so the plan runs under the FSM's
// read lock: applies wait for one map walk, not for a copy of every lease.
func (s *Store) planExpiry(now time.Time) []lease.Command {
	var cmds []lease.Command
	s.fsm.read(func(m *lease.Model) {
		in := expiryInput{Leases: m.LiveScan(), IntentsUntil: m.IntentsUntil, Sessions: m.SessionIDs(), Profile: m.TaskProfile}
		for _, id := range m.WaitingDue(now) {
			if t, ok := m.Task(id); ok && t.Lease != nil {
				if in.Waiting == nil {
					in.Waiting = map[string]uint64{}
				}
				in.Waiting[id] = t.Lease.Epoch
			}
		}
		cmds = s.lessor.plan(in, s.cfg.ProposalsPerTick)
	})
	return cmds
}

// expireOnce runs one tick; it returns the number of proposals made.
func (s *Store) expireOnce(ctx context.Context) int {
	cmds := s.planExpiry(s.clock.Now())
	if len(cmds) == 0 {
		return 0
	}
	var wg sync.WaitGroup
	for i := range cmds {
		wg.Add(1)
		go func(c *lease.Command) {
			defer wg.Done()
			res, err := s.propose(ctx, c)
			if c.Op == lease.OpCloseSession && err == nil {
				// Applied or refused: either way no close is in flight.
				// On an error the outcome is unknown, so the mark stays
				// and the next tick proposes again.
				s.lessor.closeDone(c.SessionID)
			}
			if err != nil {
				if !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrShutdown) && ctx.Err() == nil {
					s.log.Warn("expiry proposal failed", zap.String("op", c.Op.String()), zap.Error(err))
				}
				return
			}
			s.observeExpiry(c, res)
		}(&cmds[i])
	}
	wg.Wait()
	return len(cmds)
}

// observeExpiry logs and counts what a leader-driven transition did.
func (s *Store) observeExpiry(c *lease.Command, res lease.Result) {
	if res.Err != nil {
		// Lost a race (the holder heartbeated, released, ...): harmless.
		s.log.Debug("expiry proposal was a no-op", zap.String("op", c.Op.String()),
			zap.String("task", c.TaskID), zap.Error(res.Err))
		return
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
	s.log.Info("lease transition", zap.String("op", c.Op.String()), zap.String("task", c.TaskID),
		zap.String("session", c.SessionID), zap.Uint64("epoch", c.Epoch))
}

// observeSignal records how long a task sat in paused_waiting_external.
func (s *Store) observeSignal(c *lease.Command, res lease.Result) {
	if res.Err != nil || res.Duplicate || res.Task == nil || res.Task.Lease == nil {
		return
	}
	if l := res.Task.Lease; l.Status == lease.StatusPausedWaiting && !l.StatusAt.IsZero() {
		s.m.pausedSeconds.Observe(c.Time.Sub(l.StatusAt).Seconds())
	}
}
