package proxy

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

// Retry delays after a failed heartbeat or session open: exponential from
// retryBase, capped at a quarter of the heartbeat interval (so several
// retries fit in one validity) but never below retryBase, then jittered
// into [d/2, d) so many sidecars do not retry in step.
const retryBase = 100 * time.Millisecond

func retryDelay(fails int, interval time.Duration) time.Duration {
	limit := interval / 4
	if limit < retryBase {
		limit = retryBase
	}
	d := retryBase
	for i := 1; i < fails && d < limit; i++ {
		d *= 2
	}
	if d > limit {
		d = limit
	}
	return d/2 + rand.N(d/2+1)
}

// runHeartbeat owns the session: it opens it, then sends one heartbeat per
// interval (the smallest among held leases), each naming every held
// lease. Exactly one heartbeat is in flight at a time because this single
// goroutine sends them synchronously.
func (s *Sidecar) runHeartbeat(ctx context.Context) {
	fails := 0
	var lastSent time.Time
	for ctx.Err() == nil {
		sid := s.sessionID()
		if sid == "" {
			if err := s.openSession(ctx); err != nil {
				fails++
				s.log.Warn("open session", zap.Int("attempt", fails), zap.Error(err))
				s.sleep(ctx, retryDelay(fails, s.cfg.SessionHeartbeat), nil)
				continue
			}
			fails = 0
			lastSent = s.clock.Now()
			continue
		}
		// Wait until the next heartbeat is due; a change of the lease set
		// recomputes the due time (a new lease may have a shorter interval).
		for {
			due := lastSent.Add(s.leases.interval(s.cfg.SessionHeartbeat))
			if fails > 0 {
				due = lastSent.Add(retryDelay(fails, s.leases.interval(s.cfg.SessionHeartbeat)))
			}
			wait := due.Sub(s.clock.Now())
			if wait <= 0 {
				break
			}
			if woke := s.sleep(ctx, wait, s.wakeHB); !woke || s.hbNow.Swap(false) {
				break
			}
		}
		if ctx.Err() != nil {
			return
		}
		lastSent = s.heartbeat(ctx, sid, &fails)
	}
}

// heartbeat makes one attempt and applies its reply; it returns the send
// time, from which the next one is scheduled.
func (s *Sidecar) heartbeat(ctx context.Context, sid string, fails *int) time.Time {
	iv := s.leases.interval(s.cfg.SessionHeartbeat)
	timeout := s.cfg.ClusterTimeout
	if timeout > iv {
		timeout = iv
	}
	req := api.HeartbeatRequest{Leases: s.leases.heldList()}
	hctx, cancel := context.WithTimeout(ctx, timeout)
	sent := s.clock.Now()
	wall := time.Now()
	resp, err := s.cluster.HeartbeatOnce(hctx, sid, req)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return sent
		}
		*fails++
		s.metrics.heartbeatFails.Inc()
		if ce := s.log.Check(zap.WarnLevel, "heartbeat failed"); ce != nil {
			ce.Write(zap.Int("attempt", *fails), zap.Error(err))
		}
		if errors.Is(err, lease.ErrSessionNotFound) {
			s.sessionLost("session not found")
		}
		return sent
	}
	*fails = 0
	s.metrics.heartbeatLatency.Observe(time.Since(wall).Seconds())
	s.applyHeartbeat(resp, sent)
	return sent
}

// applyHeartbeat applies a reply to a heartbeat sent at sent: renewals
// extend deadlines from the send time; signals take effect at once.
func (s *Sidecar) applyHeartbeat(resp api.HeartbeatResponse, sent time.Time) {
	changed := false
	for _, ls := range resp.Leases {
		kind, g, epoch := s.leases.renew(ls, sent, s.clock.Now())
		s.cut(g)
		if kind == "" {
			continue
		}
		changed = true
		why := ls.Reason
		if why == "" {
			why = ls.Signal
		}
		if why == "" {
			why = string(ls.Status)
		}
		s.publish(kind, ls.TaskID, epoch, why)
	}
	// Deadlines moved: the watchdog must re-arm even when nothing changed.
	select {
	case s.wakeDog <- struct{}{}:
	default:
	}
	if changed {
		s.poke()
	}
}

// sessionLost forgets the session and every lease held through it; the
// loop opens a new session, and the worker must acquire again.
func (s *Sidecar) sessionLost(why string) {
	s.setSession("")
	for _, l := range s.leases.dropAll(reasonLost) {
		s.cut(l.gen)
		s.publish(EventLost, l.taskID, l.epoch, why)
	}
}

// runWatchdog cuts a lease's connections and tunnels and publishes "lost"
// the moment its local deadline passes without a renewal. Blocking new
// writes does not depend on it (every request compares the deadline with
// the clock); the watchdog stops what is already in flight.
func (s *Sidecar) runWatchdog(ctx context.Context) {
	for {
		var fire <-chan time.Time
		var t Timer
		if due, ok := s.leases.nextDeadline(); ok {
			d := due.Sub(s.clock.Now())
			if d <= 0 {
				s.expireDue()
				continue
			}
			t = s.clock.NewTimer(d)
			fire = t.C()
		}
		select {
		case <-ctx.Done():
			if t != nil {
				t.Stop()
			}
			return
		case <-s.wakeDog:
		case <-fire:
			s.expireDue()
		}
		if t != nil {
			t.Stop()
		}
	}
}

func (s *Sidecar) expireDue() {
	for _, l := range s.leases.expireDue(s.clock.Now()) {
		s.cut(l.gen)
		s.publish(EventLost, l.taskID, l.epoch, "local deadline passed without renewal")
	}
}

// sleep waits d on the sidecar's clock. It returns true when woken early
// through wake, false when d passed or ctx ended.
func (s *Sidecar) sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	t := s.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return false
	case <-wake:
		return true
	}
}
