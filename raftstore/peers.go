package raftstore

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// peerWatch is the leader's view of which peers its raft heartbeats reach,
// built from raft's heartbeat observations: a peer whose heartbeats fail
// is unreachable, and the leader remembers when it last heard from it.
// Status reports it, so an operator sees a dead member as such rather than
// as a follower. The view starts empty on every change of leader.
type peerWatch struct {
	mu      sync.Mutex
	failing map[raft.ServerID]time.Time // peer -> last contact, while heartbeats to it fail
}

func (p *peerWatch) observe(o raft.Observation) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch d := o.Data.(type) {
	case raft.FailedHeartbeatObservation:
		if p.failing == nil {
			p.failing = map[raft.ServerID]time.Time{}
		}
		p.failing[d.PeerID] = d.LastContact
	case raft.ResumedHeartbeatObservation:
		delete(p.failing, d.PeerID)
	case raft.LeaderObservation:
		p.failing = nil
	}
}

// unreachable returns the last contact with id when heartbeats to it fail.
func (p *peerWatch) unreachable(id raft.ServerID) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.failing[id]
	return t, ok
}

// watchPeers feeds raft's heartbeat and leader observations to s.peers
// until the store closes.
func (s *Store) watchPeers() {
	ch := make(chan raft.Observation, 16)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.FailedHeartbeatObservation, raft.ResumedHeartbeatObservation, raft.LeaderObservation:
			return true
		}
		return false
	})
	s.raft.RegisterObserver(obs)
	defer s.raft.DeregisterObserver(obs)
	for {
		select {
		case <-s.closing:
			return
		case o := <-ch:
			s.peers.observe(o)
		}
	}
}
