package leases

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/clock"
)

// Retry delays after a failed heartbeat or session open: exponential from
// retryBase, capped at a quarter of the heartbeat interval (so several
// retries fit in one validity) but never below retryBase, then jittered
// into [d/2, d) so many sidecars do not retry in step.
const retryBase = 100 * time.Millisecond

func retryDelay(fails int, interval time.Duration) time.Duration {
	limit := max(interval/4, retryBase)
	d := retryBase
	for i := 1; i < fails && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	return d/2 + rand.N(d/2+1)
}

// runHeartbeat owns the session: it opens it, then sends one heartbeat per
// interval (the smallest among held leases), each naming every held
// lease. Exactly one heartbeat is in flight at a time because this single
// goroutine sends them synchronously (DESIGN.md 4.2).
func (k *Keeper) runHeartbeat(ctx context.Context) {
	fails := 0
	var lastSent time.Time
	for ctx.Err() == nil {
		sid := k.SessionID()
		if sid == "" {
			if err := k.openSession(ctx); err != nil {
				fails++
				k.log.Warn("open session", zap.Int("attempt", fails), zap.Error(err))
				k.sleep(ctx, retryDelay(fails, k.cfg.SessionHeartbeat), nil)
				continue
			}
			fails = 0
			lastSent = k.clock.Now()
			continue
		}
		// Wait until the next heartbeat is due; a change of the lease set
		// recomputes the due time (a new lease may have a shorter interval).
		for {
			iv := k.table.interval(k.cfg.SessionHeartbeat)
			due := lastSent.Add(iv)
			if fails > 0 {
				due = lastSent.Add(retryDelay(fails, iv))
			}
			wait := due.Sub(k.clock.Now())
			if wait <= 0 {
				break
			}
			if woke := k.sleep(ctx, wait, k.wake.hb); !woke || k.wake.hbNow.Swap(false) {
				break
			}
		}
		if ctx.Err() != nil {
			return
		}
		lastSent = k.heartbeat(ctx, sid, &fails)
	}
}

// heartbeatNow makes the heartbeat loop stop waiting and send one.
func (k *Keeper) heartbeatNow() {
	k.wake.hbNow.Store(true)
	ring(k.wake.hb)
}

// HeartbeatOnce sends one heartbeat on the open session now and applies
// its answer, as the loop's own step does (nothing when no session is
// open): a renewal that must not wait for the schedule.
func (k *Keeper) HeartbeatOnce(ctx context.Context) {
	if sid := k.SessionID(); sid != "" {
		k.heartbeat(ctx, sid, new(int))
	}
}

// heartbeat makes one attempt and applies its reply; it returns the send
// time, from which the next one is scheduled.
func (k *Keeper) heartbeat(ctx context.Context, sid string, fails *int) time.Time {
	timeout := min(k.cfg.ClusterTimeout, k.table.interval(k.cfg.SessionHeartbeat))
	req := api.HeartbeatRequest{Leases: k.table.heldList()}
	k.progress.stamp(req.Leases, k.clock.Now())
	hctx, cancel := context.WithTimeout(ctx, timeout)
	sent := k.clock.Now()
	wall := time.Now()
	resp, err := k.cluster.HeartbeatOnce(hctx, sid, req)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return sent
		}
		*fails++
		k.failing.Store(true)
		k.metrics.heartbeatFails.Inc()
		if ce := k.log.Check(zap.WarnLevel, "heartbeat failed"); ce != nil {
			ce.Write(zap.Int("attempt", *fails), zap.Error(err))
		}
		if errors.Is(err, lease.ErrSessionNotFound) {
			k.sessionLost("session not found")
		}
		return sent
	}
	*fails = 0
	k.failing.Store(false)
	k.metrics.heartbeatLatency.Observe(time.Since(wall).Seconds())
	k.applyHeartbeat(resp, sent)
	return sent
}

// applyHeartbeat applies a reply to a heartbeat sent at sent: renewals
// extend deadlines from the send time; signals take effect at once.
func (k *Keeper) applyHeartbeat(resp api.HeartbeatResponse, sent time.Time) {
	changed := false
	for _, ls := range resp.Leases {
		kind, c, epoch := k.table.renew(ls, sent, k.clock.Now())
		k.cut(c)
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
		k.publish(kind, ls.TaskID, epoch, why)
	}
	// Deadlines moved: the watchdog must re-arm even when nothing changed.
	ring(k.wake.dog)
	if changed {
		k.changed()
	}
}

// runWatchdog cuts a lease's connections and tunnels and publishes "lost"
// the moment it may no longer write. Blocking new writes does not depend
// on it (every request asks mayWrite); the watchdog stops what is already
// in flight.
func (k *Keeper) runWatchdog(ctx context.Context) {
	for {
		// One instant for both: a deadline between two clock reads would
		// be neither lapsed nor waited for.
		now := k.clock.Now()
		for _, l := range k.table.lapseDue(now) {
			k.cut(l.cut)
			k.publish(EventLost, l.taskID, l.epoch, "local deadline passed without renewal")
		}
		var fire <-chan time.Time
		var t clock.Timer
		if due, ok := k.table.nextDeadline(now); ok {
			t = k.clock.NewTimer(due.Sub(now))
			fire = t.C()
		}
		select {
		case <-ctx.Done():
			if t != nil {
				t.Stop()
			}
			return
		case <-k.wake.dog:
		case <-fire:
		}
		if t != nil {
			t.Stop()
		}
	}
}

// sessionWatcher is the optional long-poll of the cluster client
// (*cluster.Client has it). Without it the sidecar learns of a revocation
// at its next heartbeat, up to one interval later; with it, within a round
// trip. Safety never depends on it: the local deadline does.
type sessionWatcher interface {
	WatchSession(ctx context.Context, sid string, since uint64, wait time.Duration) (uint64, error)
}

// watchWait is how long one watch waits on the cluster.
const watchWait = 3 * time.Second

// runWatch long-polls the cluster for changes to the session's leases and,
// on one, makes the heartbeat loop send a heartbeat now; the reply carries
// the signal (revoked, lost, ...) through the one path that applies it.
func (k *Keeper) runWatch(ctx context.Context, w sessionWatcher) {
	var (
		since  uint64
		primed bool
		sid    string
		fails  int
	)
	for ctx.Err() == nil {
		cur := k.SessionID()
		if cur == "" || k.table.count() == 0 {
			// Nothing to be told about; re-check when the lease set changes.
			k.sleep(ctx, time.Second, k.wake.watch)
			primed = false
			continue
		}
		if cur != sid {
			sid, since, primed = cur, 0, false
		}
		v, err := w.WatchSession(ctx, sid, since, watchWait)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			fails++
			if ce := k.log.Check(zap.DebugLevel, "watch failed"); ce != nil {
				ce.Write(zap.Int("attempt", fails), zap.Error(err))
			}
			// The next answer may come from another member, whose
			// versions are its own: start over from its baseline.
			since, primed = 0, false
			k.sleep(ctx, retryDelay(fails, time.Second), nil)
			continue
		}
		fails = 0
		// A first answer is a baseline that may already include a change
		// made before the watch began (a revoke right after the acquire):
		// heartbeat then too, since its reply reflects everything applied.
		if !primed || v != since {
			k.heartbeatNow()
		}
		since, primed = v, true
	}
}
