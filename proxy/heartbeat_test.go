package proxy

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/leases"
	"github.com/fencepost/fencepost/proxy/proxytest"
)

// hbSidecar starts a sidecar on a fake clock with one lease.
func hbSidecar(t *testing.T, fc *fakeCluster) (*Sidecar, *proxytest.Clock) {
	clk := proxytest.NewClock()
	cfg := baseConfig(t)
	cfg.Clock = clk
	s := startSidecar(t, fc, cfg)
	return s, clk
}

// advanceUntil advances the fake clock in steps until cond holds.
func advanceUntil(t *testing.T, clk *proxytest.Clock, step time.Duration, cond func() bool, msg string) {
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
	fc.HbEvery = 3 * time.Second
	s, clk := hbSidecar(t, fc)
	mustAcquire(t, s, "a")
	fc.Mu.Lock()
	fc.HbEvery = 2 * time.Second
	fc.Mu.Unlock()
	mustAcquire(t, s, "b")

	n := len(fc.Heartbeats())
	// Waiting for the loop to arm its 2s timer, then 2s pass: one heartbeat.
	eventually(t, func() bool {
		for _, d := range clk.Pending() {
			if d > time.Second && d <= 2*time.Second {
				return true
			}
		}
		return false
	}, "heartbeat timer armed at the smallest interval")
	clk.Advance(2 * time.Second)
	eventually(t, func() bool { return len(fc.Heartbeats()) > n }, "heartbeat sent")
	hb := fc.Heartbeats()[n]
	require.Equal(t, []api.HeldLease{{TaskID: "a", Epoch: 101}, {TaskID: "b", Epoch: 102}}, hb.Leases)
	fc.Mu.Lock()
	require.Equal(t, 1, fc.MaxFlight, "exactly one heartbeat in flight")
	fc.Mu.Unlock()
}

func TestStuckHeartbeatStillBlocksAtDeadline(t *testing.T) {
	fc := newFakeCluster()
	fc.ValidFor = 10 * time.Second
	fc.HbEvery = 3 * time.Second
	block := make(chan struct{})
	fc.HbBlock = block
	defer close(block)
	s, clk := hbSidecar(t, fc)
	mustAcquire(t, s, "t")
	events, cancel := s.Subscribe()
	defer cancel()

	// The heartbeat loop is stuck inside the cluster call (it never
	// returns: the fake blocks on a channel, and the context timeout is
	// real time). Time passes on the sidecar's clock only.
	clk.Advance(9799 * time.Millisecond)
	_, why := s.keeper.Check("t")
	require.Empty(t, why)
	clk.Advance(time.Millisecond)
	_, why = s.keeper.Check("t")
	require.Equal(t, leases.ReasonExpired, why, "blocked at the deadline even though no heartbeat reply came")
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
	fc.ValidFor = 10 * time.Second
	fc.HbEvery = 3 * time.Second
	s, clk := hbSidecar(t, fc)
	mustAcquire(t, s, "t")
	fc.Mu.Lock()
	fc.HbErr = errors.New("partition")
	fc.Mu.Unlock()
	n := len(fc.Heartbeats())
	advanceUntil(t, clk, 100*time.Millisecond, func() bool { return len(fc.Heartbeats()) >= n+4 }, "retries")
	advanceUntil(t, clk, 100*time.Millisecond, func() bool {
		_, why := s.keeper.Check("t")
		return why == leases.ReasonExpired
	}, "expired")
	// Healing: the next heartbeat revives it (same epoch).
	ev, cancel := s.Subscribe()
	defer cancel()
	fc.Mu.Lock()
	fc.HbErr = nil
	fc.Mu.Unlock()
	advanceUntil(t, clk, 100*time.Millisecond, func() bool {
		_, why := s.keeper.Check("t")
		return why == ""
	}, "revived")
	// The watchdog's lost event for the expiry may be published after
	// Check saw it (the watchdog runs on its own), so it may come first.
	kinds := []EventKind{}
	for len(kinds) < 2 {
		select {
		case e := <-ev:
			kinds = append(kinds, e.Kind)
		case <-time.After(5 * time.Second):
			t.Fatalf("no revived event; saw %v", kinds)
		}
		if kinds[len(kinds)-1] == EventRevived {
			break
		}
	}
	require.Equal(t, EventRevived, kinds[len(kinds)-1], "events: %v", kinds)
	if len(kinds) == 2 {
		require.Equal(t, EventLost, kinds[0], "events: %v", kinds)
	}
}

func TestSessionLostDropsLeases(t *testing.T) {
	fc := newFakeCluster()
	s, clk := hbSidecar(t, fc)
	mustAcquire(t, s, "t")
	ev, cancel := s.Subscribe()
	defer cancel()
	fc.Mu.Lock()
	fc.HbErr = lease.ErrSessionNotFound
	fc.Mu.Unlock()
	advanceUntil(t, clk, 500*time.Millisecond, func() bool { return len(s.keeper.Views()) == 0 }, "leases dropped")
	require.Equal(t, EventLost, (<-ev).Kind)
	fc.Mu.Lock()
	fc.HbErr = nil
	fc.Mu.Unlock()
	advanceUntil(t, clk, 500*time.Millisecond, func() bool { return s.keeper.SessionFor("") != "" && s.keeper.SessionFor("") != "s1" }, "new session")
}
