package proxy

import (
	"context"
	"time"

	"go.uber.org/zap"
)

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
func (s *Sidecar) runWatch(ctx context.Context, w sessionWatcher) {
	var (
		since  uint64
		primed bool
		sid    string
		fails  int
	)
	for ctx.Err() == nil {
		cur := s.sessionID()
		if cur == "" || len(s.leases.heldList()) == 0 {
			// Nothing to be told about; re-check when the lease set changes.
			s.sleep(ctx, time.Second, s.wakeWatch)
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
			if ce := s.log.Check(zap.DebugLevel, "watch failed"); ce != nil {
				ce.Write(zap.Int("attempt", fails), zap.Error(err))
			}
			// The next answer may come from another member, whose
			// versions are its own: start over from its baseline.
			since, primed = 0, false
			s.sleep(ctx, retryDelay(fails, time.Second), nil)
			continue
		}
		fails = 0
		// A first answer is a baseline that may already include a change
		// made before the watch began (a revoke right after the acquire):
		// heartbeat then too, since its reply reflects everything applied.
		if !primed || v != since {
			s.heartbeatNow()
		}
		since, primed = v, true
	}
}

// heartbeatNow makes the heartbeat loop stop waiting and send one.
func (s *Sidecar) heartbeatNow() {
	s.hbNow.Store(true)
	select {
	case s.wakeHB <- struct{}{}:
	default:
	}
}
