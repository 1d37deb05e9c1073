package proxy

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

// openSession opens the sidecar's one session with the cluster.
func (s *Sidecar) openSession(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, s.cfg.ClusterTimeout)
	defer cancel()
	sess, err := s.cluster.OpenSession(cctx, api.OpenSessionRequest{WorkerID: s.cfg.WorkerID})
	if err != nil {
		return err
	}
	s.setSession(sess.SessionID)
	s.log.Info("session open", zap.String("session", sess.SessionID))
	return nil
}

// acquire asks the cluster for a named task's lease (or, with claim, for
// the most urgent claimable task) and records the grant. The local
// deadline counts from the moment the request was sent.
func (s *Sidecar) acquire(ctx context.Context, taskID string, claim bool, req api.AcquireRequest) (api.Grant, error) {
	sid := s.sessionID()
	if sid == "" {
		return api.Grant{}, ErrNoSession
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.ClusterTimeout)
	defer cancel()
	sent := s.clock.Now()
	var g api.Grant
	var err error
	if claim {
		g, err = s.cluster.Claim(cctx, api.ClaimRequest{SessionID: sid})
	} else {
		req.SessionID = sid
		g, err = s.cluster.Acquire(cctx, taskID, req)
	}
	if err != nil {
		if errors.Is(err, lease.ErrSessionNotFound) {
			s.sessionLost("session not found")
			s.poke()
		}
		return api.Grant{}, err
	}
	if g.Lease.TaskID == "" && g.Task.ID == "" {
		return api.Grant{}, fmt.Errorf("proxy: cluster returned a grant without a task id")
	}
	snap := s.leases.grant(g, sent, s.clock.Now())
	s.publish(EventAcquired, snap.TaskID, snap.Epoch, "")
	s.poke()
	return g, nil
}

// runOneTask acquires the configured task (creating it when missing) and
// retries with jitter until it holds it or the sidecar stops. A lease
// lost later is not re-acquired: a revoke must stick, and a worker whose
// lease expired should restart from the checkpoint with a fresh sidecar.
func (s *Sidecar) runOneTask(ctx context.Context) {
	fails := 0
	for ctx.Err() == nil {
		_, err := s.acquire(ctx, s.cfg.Task, false, api.AcquireRequest{Create: true, Profile: s.cfg.Profile})
		if err == nil {
			return
		}
		if errors.Is(err, lease.ErrTaskFinal) {
			s.log.Error("one-task mode: task is final; not acquiring", zap.String("task", s.cfg.Task), zap.Error(err))
			return
		}
		fails++
		if !errors.Is(err, ErrNoSession) {
			if ce := s.log.Check(zap.InfoLevel, "one-task mode: acquire failed, retrying"); ce != nil {
				ce.Write(zap.String("task", s.cfg.Task), zap.Int("attempt", fails), zap.Error(err))
			}
		}
		s.sleep(ctx, retryDelay(fails, 4*s.cfg.SessionHeartbeat), nil)
	}
}

// ready reports the readiness condition: a session, and in one-task mode
// a current lease on the task.
func (s *Sidecar) ready() (bool, string) {
	if s.draining.Load() {
		return false, "draining"
	}
	if s.sessionID() == "" {
		return false, "no cluster session"
	}
	if s.cfg.Task != "" {
		if _, why := s.leases.current(s.cfg.Task, s.clock.Now()); why != "" {
			return false, "no current lease on " + s.cfg.Task + ": " + string(why)
		}
	}
	return true, "ok"
}
