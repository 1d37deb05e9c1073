package raftstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"go.uber.org/zap"
)

// Heartbeat renews a session and every lease held through it (DESIGN.md 4).
// The renewal is recorded in the leader's memory at arrival; the reply is
// sent only after a VerifyLeader round begun after arrival confirmed this
// node still leads, so a deposed leader can extend nothing. ValidForMs is
// the TTL, measured from arrival: the sidecar's deadline is its send time
// + validFor − margin, which is never later than the leader's.
//
// A suspect_dead lease of the session is revived (same epoch) and reported
// SignalRevived. Every lease the request names that is no longer this
// session's live lease is reported lost, revoked or waiting; one that
// another session now holds raises the double-execution alarm.
func (s *Store) Heartbeat(ctx context.Context, sessionID string, req api.HeartbeatRequest) (api.HeartbeatResponse, error) {
	if err := checkSessionID(sessionID); err != nil {
		return api.HeartbeatResponse{}, err
	}
	if len(req.Leases) > maxHeldLeases {
		return api.HeartbeatResponse{}, tooLarge("leases", len(req.Leases), maxHeldLeases)
	}
	for _, h := range req.Leases {
		if err := s.cmds.checkTaskID(h.TaskID); err != nil {
			return api.HeartbeatResponse{}, err
		}
		if h.SinceProgressMs > api.MaxSinceProgressMs {
			return api.HeartbeatResponse{}, invalid("sinceProgressMs must be at most %d", uint64(api.MaxSinceProgressMs))
		}
	}
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	if err := s.waitOffice(ctx); err != nil {
		return api.HeartbeatResponse{}, err
	}
	recv := s.clock.Now()
	var (
		ok       bool
		renewErr error
	)
	s.fsm.read(func(m *lease.Model) {
		if ok = m.HasSession(sessionID); ok {
			if renewErr = checkSessionOwner(ctx, m, sessionID); renewErr == nil {
				renewErr = s.lessor.renew(recv, sessionID)
			}
		}
	})
	if !ok {
		// Only a node still leading may say a session does not exist: a
		// deposed leader's state can predate the session, and a client
		// that hedges heartbeats across members would drop every lease on
		// its word.
		if err := s.verify.wait(ctx); err != nil {
			return api.HeartbeatResponse{}, err
		}
		return api.HeartbeatResponse{}, fmt.Errorf("raftstore: session %q: %w", sessionID, lease.ErrSessionNotFound)
	}
	if renewErr != nil {
		return api.HeartbeatResponse{}, renewErr
	}
	if err := s.verify.wait(ctx); err != nil {
		return api.HeartbeatResponse{}, err
	}
	resp, err := s.heartbeatReply(ctx, sessionID, req, recv)
	if err != nil {
		return api.HeartbeatResponse{}, err
	}
	renewed := 0
	for i := range resp.Leases {
		if resp.Leases[i].ValidForMs > 0 {
			renewed++
		}
	}
	s.m.heartbeats.Inc()
	s.m.renewals.Add(float64(renewed))
	s.m.heartbeatLatency.Observe(s.clock.Now().Sub(recv).Seconds())
	return resp, nil
}

// heartbeatReply builds the per-lease answer from the state after the
// verify round, ordered by task id, recording the progress marks the
// request carries (received at recv) and reviving suspect leases on the
// way.
func (s *Store) heartbeatReply(ctx context.Context, sessionID string, req api.HeartbeatRequest, recv time.Time) (api.HeartbeatResponse, error) {
	var (
		ok       bool
		resp     = api.HeartbeatResponse{Leases: make([]api.LeaseState, 0, len(req.Leases))}
		minTTL   time.Duration
		suspects []lease.Lease
		marks    = progressMarks(req, recv)
	)
	s.fsm.read(func(m *lease.Model) {
		if ok = m.HasSession(sessionID); !ok {
			return
		}
		for l := range m.SessionScan(sessionID) {
			st := api.LeaseState{TaskID: l.TaskID, Epoch: l.Epoch, Status: l.Status}
			k := leaseKey{l.TaskID, l.Epoch}
			if at, marked := marks[k]; marked {
				s.lessor.progressed(k, at)
			}
			if s.stallHolds(m, l) {
				// Stays suspect with no renewal: the sidecar blocks its
				// writes and keeps naming the lease, so a progress mark
				// in a later heartbeat can still revive it.
				st.Reason = lease.ReasonStalled
				resp.Leases = append(resp.Leases, st)
				continue
			}
			switch l.Status {
			case lease.StatusActive:
				st.ValidForMs = l.TTL.Milliseconds()
				if minTTL == 0 || l.TTL < minTTL {
					minTTL = l.TTL
				}
			case lease.StatusSuspectDead:
				// Revived below, outside the read: a proposal waits for
				// the apply, which needs the FSM's write lock.
				suspects = append(suspects, *l)
			default: // expired: waiting for the resume guard, never coming back
				st.Signal = api.SignalLost
				st.Reason = "lease expired"
			}
			resp.Leases = append(resp.Leases, st)
		}
	})
	if !ok {
		return api.HeartbeatResponse{}, fmt.Errorf("raftstore: session %q: %w", sessionID, lease.ErrSessionNotFound)
	}
	for _, l := range suspects {
		revived, err := s.revive(ctx, sessionID, l)
		if err != nil {
			return api.HeartbeatResponse{}, err
		}
		i := slices.IndexFunc(resp.Leases, func(st api.LeaseState) bool { return st.TaskID == l.TaskID && st.Epoch == l.Epoch })
		st := &resp.Leases[i]
		if revived {
			st.Status, st.Signal, st.ValidForMs = lease.StatusActive, api.SignalRevived, l.TTL.Milliseconds()
			if minTTL == 0 || l.TTL < minTTL {
				minTTL = l.TTL
			}
		} else {
			st.Signal = api.SignalLost
		}
	}
	slices.SortFunc(resp.Leases, cmpLeaseState)
	live := len(resp.Leases)
	for _, h := range req.Leases {
		if _, found := slices.BinarySearchFunc(resp.Leases[:live], api.LeaseState{TaskID: h.TaskID, Epoch: h.Epoch}, cmpLeaseState); found ||
			slices.ContainsFunc(resp.Leases[live:], func(st api.LeaseState) bool { return st.TaskID == h.TaskID && st.Epoch == h.Epoch }) {
			continue
		}
		resp.Leases = append(resp.Leases, s.namedLeaseState(sessionID, h))
	}
	if minTTL == 0 {
		_, p, _ := s.cmds.profile("")
		minTTL = p.TTL
	}
	resp.ValidForMs = minTTL.Milliseconds()
	return resp, nil
}

// progressMarks returns, per lease, when the request says its worker last
// showed progress: the arrival minus how long before sending it happened,
// never earlier than the mark really was (the request was sent before it
// arrived). Nil when the request carries none.
func progressMarks(req api.HeartbeatRequest, recv time.Time) map[leaseKey]time.Time {
	var marks map[leaseKey]time.Time
	for _, h := range req.Leases {
		if h.SinceProgressMs == 0 {
			continue
		}
		if marks == nil {
			marks = map[leaseKey]time.Time{}
		}
		marks[leaseKey{h.TaskID, h.Epoch}] = recv.Add(-time.Duration(h.SinceProgressMs) * time.Millisecond)
	}
	return marks
}

// stallHolds reports whether l is suspected of stalling and has shown no
// progress since: a heartbeat alone must not revive it (progress.go).
func (s *Store) stallHolds(m *lease.Model, l *lease.Lease) bool {
	if l.Status != lease.StatusSuspectDead || l.Reason != lease.ReasonStalled || s.lessor.stallOf == nil {
		return false
	}
	name, _ := m.TaskProfile(l.TaskID)
	return !s.lessor.stallCleared(*l, s.lessor.stallOf(name))
}

// cmpLeaseState orders lease states by task id, then epoch.
func cmpLeaseState(a, b api.LeaseState) int {
	if c := strings.Compare(a.TaskID, b.TaskID); c != 0 {
		return c
	}
	return cmp.Compare(a.Epoch, b.Epoch)
}

// revive proposes OpRevive for a suspect lease whose holder is alive after
// all. It reports whether the lease is active again with the same epoch.
func (s *Store) revive(ctx context.Context, sessionID string, l lease.Lease) (bool, error) {
	res, err := s.propose(ctx, &lease.Command{Op: lease.OpRevive, TaskID: l.TaskID, Epoch: l.Epoch,
		SessionID: sessionID, Reason: "late heartbeat"})
	if err != nil {
		return false, err
	}
	if res.Err != nil || res.Lease == nil || res.Lease.Status != lease.StatusActive {
		return false, nil
	}
	s.m.revived.Inc()
	s.log.Info("lease revived", zap.String("task", l.TaskID), zap.Uint64("epoch", l.Epoch))
	return true, nil
}

// namedLeaseState answers for a lease the sidecar believes it holds but
// that is not among the session's live leases.
func (s *Store) namedLeaseState(sessionID string, h api.HeldLease) api.LeaseState {
	st := api.LeaseState{TaskID: h.TaskID, Epoch: h.Epoch, Signal: api.SignalLost}
	var (
		t  *lease.Task
		ok bool
	)
	s.fsm.read(func(m *lease.Model) { t, ok = m.Task(h.TaskID) })
	if !ok {
		st.Reason = "task not found"
		return st
	}
	if cur := t.Lease; cur != nil && cur.Status.Live() && (cur.Epoch != h.Epoch || cur.SessionID != sessionID) {
		// Someone else holds the task now while this sidecar believes it
		// does: a possible double execution.
		s.m.alarms.WithLabelValues(alarmHeartbeatForeign).Inc()
		s.log.Warn("heartbeat names a lease someone else holds", zap.String("task", h.TaskID),
			zap.Uint64("epoch", h.Epoch), zap.Uint64("currentEpoch", cur.Epoch), zap.String("session", sessionID))
	}
	var mine *lease.Lease
	if t.Lease != nil && t.Lease.Epoch == h.Epoch {
		mine = t.Lease
	}
	for i := range t.History() {
		if t.History()[i].Epoch == h.Epoch {
			mine = &t.History()[i]
		}
	}
	if mine == nil {
		st.Reason = "superseded"
		return st
	}
	st.Status, st.Reason = mine.Status, mine.Reason
	switch mine.Status {
	case lease.StatusRevoked:
		st.Signal = api.SignalRevoked
	case lease.StatusPausedWaiting:
		st.Signal = api.SignalWaiting
	}
	return st
}
