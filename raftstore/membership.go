package raftstore

import (
	"context"
	"fmt"
	"sort"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/hashicorp/raft"
	"go.uber.org/zap"
)

// Join adds a voter (on the leader). Joining again with the same id and
// raft address only refreshes the HTTP address; the same id with a new
// address, or a new id on a known address, replaces the old entry (a node
// that moved, or was rebuilt).
func (s *Store) Join(ctx context.Context, req api.JoinRequest) error {
	if !validID(req.ID, maxWorkerIDBytes) {
		return invalid("id must be 1..%d bytes of UTF-8 without control characters", maxWorkerIDBytes)
	}
	if req.RaftAddr == "" {
		return invalid("raftAddr is required")
	}
	if err := s.waitOffice(ctx); err != nil {
		return err
	}
	cf := s.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return mapRaftError(err)
	}
	id, addr := raft.ServerID(req.ID), raft.ServerAddress(req.RaftAddr)
	member := false
	for _, srv := range cf.Configuration().Servers {
		switch {
		case srv.ID == id && srv.Address == addr:
			member = true
		case srv.ID == id || srv.Address == addr:
			s.log.Info("replacing member", zap.String("id", string(srv.ID)), zap.String("oldAddr", string(srv.Address)))
			if err := s.raft.RemoveServer(srv.ID, 0, s.timeout(ctx)).Error(); err != nil {
				return mapRaftError(err)
			}
		}
	}
	if !member {
		if err := s.raft.AddVoter(id, addr, 0, s.timeout(ctx)).Error(); err != nil {
			return mapRaftError(err)
		}
		s.log.Info("member joined", zap.String("id", req.ID), zap.String("raftAddr", req.RaftAddr))
	}
	if n, ok := s.fsm.node(req.ID); ok && n.RaftAddr == req.RaftAddr && n.HTTPAddr == req.HTTPAddr {
		return nil
	}
	_, err := s.applyEntry(ctx, entryNode, nodeMeta{ID: req.ID, RaftAddr: req.RaftAddr, HTTPAddr: req.HTTPAddr})
	return err
}

// Remove removes a voter (on the leader) and forgets its HTTP address.
// Removing an unknown id is a no-op.
func (s *Store) Remove(ctx context.Context, id string) error {
	if !validID(id, maxWorkerIDBytes) {
		return invalid("id must be 1..%d bytes of UTF-8 without control characters", maxWorkerIDBytes)
	}
	if err := s.waitOffice(ctx); err != nil {
		return err
	}
	if _, ok := s.fsm.node(id); ok {
		if _, err := s.applyEntry(ctx, entryNode, nodeMeta{ID: id, Remove: true}); err != nil {
			return err
		}
	}
	if err := s.raft.RemoveServer(raft.ServerID(id), 0, s.timeout(ctx)).Error(); err != nil {
		return mapRaftError(err)
	}
	s.log.Info("member removed", zap.String("id", id))
	return nil
}

// IsLeader reports whether this node is the raft leader.
func (s *Store) IsLeader() bool { return s.raft.State() == raft.Leader }

// LeaderHTTP returns the leader's advertised HTTP address, "" when no
// leader is known or it has not published its address yet.
func (s *Store) LeaderHTTP() string {
	_, id := s.raft.LeaderWithID()
	if id == "" {
		return ""
	}
	if string(id) == s.cfg.NodeID {
		return s.cfg.HTTPAddr
	}
	n, _ := s.fsm.node(string(id))
	return n.HTTPAddr
}

// Status returns this node's view of the cluster.
func (s *Store) Status() api.ClusterStatus {
	leaderAddr, leaderID := s.raft.LeaderWithID()
	st := api.ClusterStatus{
		NodeID: s.cfg.NodeID, State: s.raft.State().String(), Leader: string(leaderID),
		LeaderHTTP: s.LeaderHTTP(), Term: s.raft.CurrentTerm(), CommitIndex: s.raft.CommitIndex(),
		AppliedIndex: s.fsm.applied.get(),
	}
	if s.raft.State() == raft.Follower {
		st.LastContact = s.raft.LastContact()
	}
	cf := s.raft.GetConfiguration()
	if cf.Error() == nil {
		for _, srv := range cf.Configuration().Servers {
			n, _ := s.fsm.node(string(srv.ID))
			m := api.Member{
				ID: string(srv.ID), RaftAddr: string(srv.Address), HTTPAddr: n.HTTPAddr,
				Leader: srv.ID == leaderID || (leaderID == "" && srv.Address == leaderAddr && leaderAddr != ""),
			}
			if at, ok := s.peers.unreachable(srv.ID); ok && s.raft.State() == raft.Leader {
				m.Unreachable, m.LastContact = true, at
			}
			st.Members = append(st.Members, m)
		}
	}
	sort.Slice(st.Members, func(i, j int) bool { return st.Members[i].ID < st.Members[j].ID })
	return st
}

// Ready returns nil when this node can serve: a leader is known and, on a
// follower, the FSM has applied everything up to the commit index seen at
// first leader contact; on the leader, it has taken office.
func (s *Store) Ready() error {
	select {
	case <-s.closing:
		return ErrShutdown
	default:
	}
	if s.raft.State() == raft.Leader {
		s.leadMu.Lock()
		ok := s.leading
		s.leadMu.Unlock()
		if !ok {
			return fmt.Errorf("%w: leader is taking office", ErrNotReady)
		}
		return nil
	}
	if _, id := s.raft.LeaderWithID(); id == "" {
		return ErrNoLeader
	}
	if s.caughtUp.Load() {
		return nil
	}
	target := s.readyTarget.Load()
	if target == 0 {
		target = s.raft.CommitIndex()
		if target == 0 {
			return fmt.Errorf("%w: no commit index from the leader yet", ErrNotReady)
		}
		s.readyTarget.Store(target)
	}
	if applied := s.raft.AppliedIndex(); applied < target {
		return fmt.Errorf("%w: applied %d of %d", ErrNotReady, applied, target)
	}
	s.caughtUp.Store(true)
	return nil
}
