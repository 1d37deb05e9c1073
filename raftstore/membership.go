package raftstore

import (
	"context"
	"fmt"
	"sort"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/hashicorp/raft"
	"go.uber.org/zap"
)

// Join adds a voter (on the leader) once the joiner proved it is the
// member it names: its raft address must answer with a member certificate
// for req.ID (with TLS; without it, only that something listens there), so
// neither a stranger nor an address nobody serves becomes a voter and
// costs the cluster its quorum. Joining again with the same id and raft
// address only refreshes the HTTP address; the same id with a new address
// updates it in place; a new id on a known address replaces the old entry
// (a rebuilt node; the old entry goes first, raft allowing one member per
// address; the old id is then denied like a removed one). A removed
// member's name is refused (the deny list, peerset.go): a rebuilt member
// joins under a new name and certificate. A refusal changes nothing.
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
	if s.fsm.isRemoved(req.ID) {
		return fmt.Errorf("%w: %s was removed from the cluster and its name is never accepted again; join under a new name and certificate",
			ErrMembership, req.ID)
	}
	cf := s.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return mapRaftError(err)
	}
	id, addr := raft.ServerID(req.ID), raft.ServerAddress(req.RaftAddr)
	member := false
	var replaced []raft.ServerID
	for _, srv := range cf.Configuration().Servers {
		switch {
		case srv.ID == id && srv.Address == addr:
			member = true
		case srv.ID != id && srv.Address == addr:
			replaced = append(replaced, srv.ID)
		}
	}
	if !member {
		if err := s.layer.prove(ctx, req.RaftAddr, req.ID); err != nil {
			s.log.Warn("join refused", zap.String("id", req.ID), zap.String("raftAddr", req.RaftAddr), zap.Error(err))
			return fmt.Errorf("%w: %s at %s: %v", ErrMembership, req.ID, req.RaftAddr, err)
		}
		// A new id on a known address (a rebuilt node): raft refuses two
		// members at one address, so the old entry goes first, and only
		// after the new node proved itself above. If the add then fails,
		// the rebuilt node retries its join (which is idempotent).
		for _, old := range replaced {
			s.log.Info("replacing member", zap.String("id", string(old)), zap.String("addr", req.RaftAddr))
			if err := s.raft.RemoveServer(old, 0, s.timeout(ctx)).Error(); err != nil {
				return mapRaftError(err)
			}
			if _, err := s.applyEntry(ctx, entryRemoved, removedMember{ID: string(old)}); err != nil {
				return err
			}
		}
		// AddVoter on a known id updates its address in place.
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

// Remove removes a member (on the leader), puts its name on the deny list
// (its certificate is refused on the raft port from then on, and Join
// refuses the name), then forgets its HTTP address. Removing the last
// voter is refused: the cluster could never commit again. Raft's change
// comes first, so a removal that fails or times out leaves the member and
// its address as they were (a retry completes it); removing an unknown id
// denies the name (a leaked certificate's) and forgets a stale address.
func (s *Store) Remove(ctx context.Context, id string) error {
	if !validID(id, maxWorkerIDBytes) {
		return invalid("id must be 1..%d bytes of UTF-8 without control characters", maxWorkerIDBytes)
	}
	if err := s.waitOffice(ctx); err != nil {
		return err
	}
	cf := s.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return mapRaftError(err)
	}
	voters, found, isVoter := 0, false, false
	for _, srv := range cf.Configuration().Servers {
		if srv.Suffrage == raft.Voter {
			voters++
		}
		if string(srv.ID) == id {
			found, isVoter = true, srv.Suffrage == raft.Voter
		}
	}
	if found && isVoter && voters == 1 {
		return fmt.Errorf("%w: %s is the last voter; removing it would leave the cluster without a quorum", ErrMembership, id)
	}
	if found {
		if err := s.raft.RemoveServer(raft.ServerID(id), 0, s.timeout(ctx)).Error(); err != nil {
			return mapRaftError(err)
		}
		s.log.Info("member removed", zap.String("id", id))
	}
	if !s.fsm.isRemoved(id) {
		if _, err := s.applyEntry(ctx, entryRemoved, removedMember{ID: id}); err != nil {
			return err
		}
	}
	if _, ok := s.fsm.node(id); ok {
		if _, err := s.applyEntry(ctx, entryNode, nodeMeta{ID: id, Remove: true}); err != nil {
			return err
		}
	}
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
	if err := s.Halted(); err != nil {
		return err
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
