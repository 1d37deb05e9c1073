package proxy

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

// watchCluster adds a session watch to the fake cluster: versions are
// pushed by the test.
type watchCluster struct {
	*fakeCluster
	vmu     sync.Mutex
	version uint64
	changed chan struct{}
	calls   int
}

func (w *watchCluster) WatchSession(ctx context.Context, _ string, since uint64, wait time.Duration) (uint64, error) {
	w.vmu.Lock()
	w.calls++
	v, ch := w.version, w.changed
	w.vmu.Unlock()
	if v != since {
		return v, nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	w.vmu.Lock()
	defer w.vmu.Unlock()
	return w.version, nil
}

func (w *watchCluster) bump() {
	w.vmu.Lock()
	defer w.vmu.Unlock()
	w.version++
	close(w.changed)
	w.changed = make(chan struct{})
}

func TestWatchBringsRevocationBeforeNextHeartbeat(t *testing.T) {
	fc := newFakeCluster()
	fc.HbEvery = time.Minute // the heartbeat alone would take a minute
	fc.ValidFor = 3 * time.Minute
	wc := &watchCluster{fakeCluster: fc, changed: make(chan struct{})}
	s := startSidecar(t, wc, baseConfig(t))
	ev, cancel := s.Subscribe()
	defer cancel()
	mustAcquire(t, s, "t")
	require.Equal(t, EventAcquired, (<-ev).Kind)
	eventually(t, func() bool { wc.vmu.Lock(); defer wc.vmu.Unlock(); return wc.calls > 0 }, "watching")

	start := time.Now()
	fc.Signal("t", api.SignalRevoked, lease.StatusRevoked)
	wc.bump()
	select {
	case e := <-ev:
		require.Equal(t, EventRevoked, e.Kind)
	case <-time.After(5 * time.Second):
		t.Fatal("revocation not seen: the watch did not trigger a heartbeat")
	}
	require.Less(t, time.Since(start), 2*time.Second)
	fc.Mu.Lock()
	require.Equal(t, 1, fc.MaxFlight, "the watch goes through the one heartbeat loop")
	fc.Mu.Unlock()
}
