package raftstore

import (
	"context"
	"sync"
	"time"

	"github.com/fencepost/fencepost/fence/lease"
)

// MaxWatchWait caps how long one watch request waits, below the HTTP
// layer's request timeout so an idle watch ends with an answer, not a 504.
const MaxWatchWait = 4 * time.Second

// sessionWatch counts, per session, the lease changes this node applied,
// and wakes the watchers of a session when its count moves. It lives on
// every node (each applies the same log), so a watch never needs the leader.
type sessionWatch struct {
	mu       sync.Mutex
	versions map[string]uint64
	wake     map[string]chan struct{}
}

func newSessionWatch() *sessionWatch {
	return &sessionWatch{versions: map[string]uint64{}, wake: map[string]chan struct{}{}}
}

// observe records the sessions whose leases a command changed, and
// forgets a closed session so the table does not grow with every session
// ever opened (its watchers are woken and see the version drop).
func (w *sessionWatch) observe(c *lease.Command, res lease.Result) {
	if res.Err != nil || res.Duplicate {
		return
	}
	if res.Lease != nil && res.Lease.SessionID != "" {
		w.bump(res.Lease.SessionID)
	}
	for _, l := range res.Released {
		w.bump(l.SessionID)
	}
	if c.Op == lease.OpCloseSession {
		w.forget(c.SessionID)
	}
}

func (w *sessionWatch) bump(sid string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.versions[sid]++
	if ch, ok := w.wake[sid]; ok {
		close(ch)
		delete(w.wake, sid)
	}
}

func (w *sessionWatch) forget(sid string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.versions, sid)
	if ch, ok := w.wake[sid]; ok {
		close(ch)
		delete(w.wake, sid)
	}
}

// size returns how many sessions the table tracks (tests).
func (w *sessionWatch) size() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.versions)
}

// wait returns the session's version once it exceeds since, or the
// current version when ctx ends or d passes.
func (w *sessionWatch) wait(ctx context.Context, sid string, since uint64, d time.Duration) uint64 {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		w.mu.Lock()
		v := w.versions[sid]
		if v > since || v < since { // v < since: the caller watched another node
			w.mu.Unlock()
			return v
		}
		ch, ok := w.wake[sid]
		if !ok {
			ch = make(chan struct{})
			w.wake[sid] = ch
		}
		w.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return v
		case <-t.C:
			return v
		}
	}
}

// WatchSession waits up to d (capped at MaxWatchWait) for a change to the
// leases of session sid after version since, and returns the version it
// saw. It answers from this node's own state, leader or not.
func (s *Store) WatchSession(ctx context.Context, sid string, since uint64, d time.Duration) (uint64, error) {
	if err := checkSessionID(sid); err != nil {
		return 0, err
	}
	if d <= 0 || d > MaxWatchWait {
		d = MaxWatchWait
	}
	var err error
	s.fsm.read(func(m *lease.Model) { err = checkSessionOwner(ctx, m, sid) })
	if err != nil {
		return 0, err
	}
	return s.fsm.watch.wait(ctx, sid, since, d), nil
}
