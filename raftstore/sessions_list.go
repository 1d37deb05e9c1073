package raftstore

import (
	"context"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

// Sessions lists open sessions ordered by id, after the id after, at most
// limit (capped at MaxListLimit), with each one's live lease count and,
// on the leader, its last heartbeat. Linearizable unless stale. It is the
// console's Workers page.
func (s *Store) Sessions(ctx context.Context, after string, limit int, stale bool) (api.SessionList, error) {
	if limit <= 0 || limit > MaxListLimit {
		limit = MaxListLimit
	}
	if !stale {
		ctx, cancel := s.readCtx(ctx)
		defer cancel()
		if err := s.linearize(ctx); err != nil {
			return api.SessionList{}, err
		}
	}
	out := api.SessionList{Sessions: []api.SessionInfo{}}
	s.fsm.read(func(m *lease.Model) {
		for _, ss := range m.Sessions() {
			if ss.ID <= after && after != "" {
				continue
			}
			if len(out.Sessions) == limit {
				out.Next = out.Sessions[limit-1].SessionID
				return
			}
			n := 0
			for range m.SessionScan(ss.ID) {
				n++
			}
			out.Sessions = append(out.Sessions, api.SessionInfo{SessionID: ss.ID, WorkerID: ss.WorkerID,
				Owner: ss.Owner, CreatedAt: ss.CreatedAt.Time(), Leases: n})
		}
	})
	if s.IsLeader() {
		for i := range out.Sessions {
			if hb, ok := s.lessor.lastHeartbeat(out.Sessions[i].SessionID); ok {
				out.Sessions[i].HeartbeatAt = hb
			}
		}
	}
	return out, nil
}
