package raftstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/hashicorp/raft"
)

// verifier batches leadership checks. A caller (a heartbeat, a
// linearizable read) joins the queue and waits for the next VerifyLeader
// round; a round only starts after it has taken the queued callers, so
// each caller's round started after the caller arrived. One round (one
// heartbeat exchange with a quorum) then serves every caller that queued
// while the previous round ran, however many there are.
type verifier struct {
	r *raft.Raft

	mu      sync.Mutex
	waiting []chan error
	kick    chan struct{}
	rounds  uint64
}

func newVerifier(r *raft.Raft) *verifier {
	return &verifier{r: r, kick: make(chan struct{}, 1)}
}

// run serves rounds until stop is closed; queued callers then get ErrShutdown.
func (v *verifier) run(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			v.finish(v.take(), ErrShutdown)
			return
		case <-v.kick:
		}
		batch := v.take()
		if len(batch) == 0 {
			continue
		}
		err := v.r.VerifyLeader().Error()
		if err != nil {
			err = mapRaftError(err)
		}
		v.mu.Lock()
		v.rounds++
		v.mu.Unlock()
		v.finish(batch, err)
	}
}

func (v *verifier) take() []chan error {
	v.mu.Lock()
	defer v.mu.Unlock()
	b := v.waiting
	v.waiting = nil
	return b
}

func (v *verifier) finish(batch []chan error, err error) {
	for _, ch := range batch {
		ch <- err
	}
}

// waitChans holds the one-answer channels of wait: a heartbeat waits for
// a round on every beat, and reusing the channel saves an allocation per
// beat on the leader.
var waitChans = sync.Pool{New: func() any { return make(chan error, 1) }}

// wait returns nil once a VerifyLeader round that started after the call
// confirmed this node's leadership.
func (v *verifier) wait(ctx context.Context) error {
	ch := waitChans.Get().(chan error)
	v.mu.Lock()
	v.waiting = append(v.waiting, ch)
	v.mu.Unlock()
	select {
	case v.kick <- struct{}{}:
	default: // a kick is pending; the next round takes us too
	}
	select {
	case err := <-ch:
		// The round sent its one answer and the channel is empty again.
		waitChans.Put(ch)
		return err
	case <-ctx.Done():
		// Not returned to the pool: the round will still send into it.
		return fmt.Errorf("%w: leadership not confirmed: %v", ErrTimeout, ctx.Err())
	}
}

// roundCount returns how many rounds ran (tests check the batching).
func (v *verifier) roundCount() uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.rounds
}
