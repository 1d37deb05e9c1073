package raftstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence/lease"
)

// watchLeadership runs the leader loop for as long as this node leads.
// raft.LeaderCh only keeps the latest value, so a true after a true means
// leadership was lost and regained in between: start over.
func (s *Store) watchLeadership() {
	var (
		stop chan struct{}
		done chan struct{}
	)
	end := func() {
		if stop == nil {
			return
		}
		close(stop)
		<-done
		stop, done = nil, nil
		s.stepDown()
	}
	defer end()
	for {
		select {
		case <-s.closing:
			return
		case isLeader := <-s.raft.LeaderCh():
			end()
			if isLeader {
				stop, done = make(chan struct{}), make(chan struct{})
				go func(stop, done chan struct{}) {
					defer close(done)
					s.leaderLoop(stop)
				}(stop, done)
			}
		}
	}
}

// leaderLoop takes office and then runs the expiry loop until stop.
// Taking office: a replicated entry naming this node's HTTP address is
// committed first; its apply proves every earlier entry is applied (a
// barrier that also tells followers where to forward). Then every live
// lease is extended to now + TTL (+ stagger) before anything may expire.
func (s *Store) leaderLoop(stop chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
		case <-ctx.Done():
		}
		cancel()
	}()
	start := s.clock.Now()
	for {
		err := s.takeOffice(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil || errors.Is(err, ErrNotLeader) || errors.Is(err, ErrShutdown) {
			return
		}
		s.log.Warn("taking office failed; retrying", zap.Error(err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.cfg.HeartbeatTimeout):
		}
	}
	s.log.Info("leader in office", zap.Uint64("term", s.raft.CurrentTerm()),
		zap.Duration("took", s.clock.Now().Sub(start)))
	s.runExpiry(ctx)
}

func (s *Store) takeOffice(ctx context.Context) error {
	self := nodeMeta{ID: s.cfg.NodeID, RaftAddr: s.RaftAddr(), HTTPAddr: s.cfg.HTTPAddr}
	if _, err := s.applyEntry(ctx, entryNode, self); err != nil {
		return err
	}
	if err := s.ensureSigningKey(ctx); err != nil {
		return err
	}
	var (
		leases   []lease.Lease
		sessions []string
	)
	s.fsm.read(func(m *lease.Model) {
		leases = m.LiveLeases()
		for _, ss := range m.Sessions() {
			sessions = append(sessions, ss.ID)
		}
	})
	s.lessor.promote(leases, sessions)
	s.leadMu.Lock()
	s.leading = true
	close(s.leadReady)
	s.leadMu.Unlock()
	return nil
}

// stepDown drops the leader's in-memory state (the lessor's Demote).
func (s *Store) stepDown() {
	s.leadMu.Lock()
	was := s.leading
	if was {
		s.leading = false
		s.leadReady = make(chan struct{})
	}
	s.leadMu.Unlock()
	s.lessor.demote()
	if was {
		s.log.Info("leader stepped down")
	}
}

// waitOffice waits until this node is a leader in office. A follower gets
// ErrNotLeader at once; a leader still taking office makes the caller wait
// (bounded by ctx), since that takes one commit round.
func (s *Store) waitOffice(ctx context.Context) error {
	for {
		if s.raft.State() != raft.Leader {
			return ErrNotLeader
		}
		s.leadMu.Lock()
		ch, ok := s.leadReady, s.leading
		s.leadMu.Unlock()
		if ok {
			return nil
		}
		t := time.NewTimer(s.cfg.HeartbeatTimeout / 4)
		select {
		case <-ch:
			t.Stop()
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: leader is still taking office", ErrNoLeader)
		case <-s.closing:
			t.Stop()
			return ErrShutdown
		}
	}
}
