package proxy

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

func TestRetryDelayJitteredAndBounded(t *testing.T) {
	for fails := 1; fails < 12; fails++ {
		d := retryDelay(fails, 4*time.Second)
		require.GreaterOrEqual(t, d, retryBase/2)
		require.LessOrEqual(t, d, time.Second, "capped at a quarter of the interval")
	}
	require.LessOrEqual(t, retryDelay(50, 100*time.Millisecond), retryBase)
}

// hbSidecar starts a sidecar on a fake clock with one lease.
func hbSidecar(t *testing.T, fc *fakeCluster) (*Sidecar, *fakeClock) {
	clk := newFakeClock()
	cfg := baseConfig(t)
	cfg.Clock = clk
	s := startSidecar(t, fc, cfg)
	return s, clk
}

// advanceUntil advances the fake clock in steps until cond holds.
func advanceUntil(t *testing.T, clk *fakeClock, step time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", msg)
		}
		clk.Advance(step)
		time.Sleep(time.Millisecond)
	}
}

func TestHeartbeatIntervalIsSmallestAndRenewsAll(t *testing.T) {
	fc := newFakeCluster()
	fc.hbEvery = 3 * time.Second
	s, clk := hbSidecar(t, fc)
	mustAcquire(t, s, "a")
	fc.mu.Lock()
	fc.hbEvery = 2 * time.Second
	fc.mu.Unlock()
	mustAcquire(t, s, "b")
	require.Equal(t, 2*time.Second, s.keeper.table.interval(time.Minute))

	n := len(fc.heartbeats())
	// Waiting for the loop to arm its 2s timer, then 2s pass: one heartbeat.
	eventually(t, func() bool {
		for _, d := range clk.pending() {
			if d > time.Second && d <= 2*time.Second {
				return true
			}
		}
		return false
	}, "heartbeat timer armed at the smallest interval")
	clk.Advance(2 * time.Second)
	eventually(t, func() bool { return len(fc.heartbeats()) > n }, "heartbeat sent")
	hb := fc.heartbeats()[n]
	require.Equal(t, []api.HeldLease{{TaskID: "a", Epoch: 101}, {TaskID: "b", Epoch: 102}}, hb.Leases)
	fc.mu.Lock()
	require.Equal(t, 1, fc.maxFlight, "exactly one heartbeat in flight")
	fc.mu.Unlock()
}

func TestStuckHeartbeatStillBlocksAtDeadline(t *testing.T) {
	fc := newFakeCluster()
	fc.validFor = 10 * time.Second
	fc.hbEvery = 3 * time.Second
	block := make(chan struct{})
	fc.hbBlock = block
	defer close(block)
	s, clk := hbSidecar(t, fc)
	mustAcquire(t, s, "t")
	events, cancel := s.Subscribe()
	defer cancel()

	// The heartbeat loop is stuck inside the cluster call (it never
	// returns: the fake blocks on a channel, and the context timeout is
	// real time). Time passes on the sidecar's clock only.
	clk.Advance(9799 * time.Millisecond)
	_, why := s.keeper.table.current("t", clk.Now())
	require.Empty(t, why)
	clk.Advance(time.Millisecond)
	_, why = s.keeper.table.current("t", clk.Now())
	require.Equal(t, ReasonExpired, why, "blocked at the deadline even though no heartbeat reply came")
	// The watchdog publishes the loss.
	select {
	case ev := <-events:
		require.Equal(t, EventLost, ev.Kind)
	case <-time.After(5 * time.Second):
		t.Fatal("no lost event")
	}
}

func TestFailedHeartbeatsRetryAndLeaseExpires(t *testing.T) {
	fc := newFakeCluster()
	fc.validFor = 10 * time.Second
	fc.hbEvery = 3 * time.Second
	s, clk := hbSidecar(t, fc)
	mustAcquire(t, s, "t")
	fc.mu.Lock()
	fc.hbErr = errors.New("partition")
	fc.mu.Unlock()
	n := len(fc.heartbeats())
	advanceUntil(t, clk, 100*time.Millisecond, func() bool { return len(fc.heartbeats()) >= n+4 }, "retries")
	advanceUntil(t, clk, 100*time.Millisecond, func() bool {
		_, why := s.keeper.table.current("t", clk.Now())
		return why == ReasonExpired
	}, "expired")
	// Healing: the next heartbeat revives it (same epoch).
	ev, cancel := s.Subscribe()
	defer cancel()
	fc.mu.Lock()
	fc.hbErr = nil
	fc.mu.Unlock()
	advanceUntil(t, clk, 100*time.Millisecond, func() bool {
		_, why := s.keeper.table.current("t", clk.Now())
		return why == ""
	}, "revived")
	require.Equal(t, EventRevived, (<-ev).Kind)
}

func TestSessionLostDropsLeases(t *testing.T) {
	fc := newFakeCluster()
	s, clk := hbSidecar(t, fc)
	mustAcquire(t, s, "t")
	ev, cancel := s.Subscribe()
	defer cancel()
	fc.mu.Lock()
	fc.hbErr = lease.ErrSessionNotFound
	fc.mu.Unlock()
	advanceUntil(t, clk, 500*time.Millisecond, func() bool { return s.keeper.table.count() == 0 }, "leases dropped")
	require.Equal(t, EventLost, (<-ev).Kind)
	fc.mu.Lock()
	fc.hbErr = nil
	fc.mu.Unlock()
	advanceUntil(t, clk, 500*time.Millisecond, func() bool { return s.keeper.SessionID() != "" && s.keeper.SessionID() != "s1" }, "new session")
}
