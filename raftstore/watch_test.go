package raftstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/lease"
)

func TestSessionWatch(t *testing.T) {
	w := newSessionWatch()
	ctx := context.Background()
	grant := lease.Result{Lease: &lease.Lease{SessionID: "s1", Epoch: 3}}

	// Nothing changed yet: the wait times out at the current version.
	require.Equal(t, uint64(0), w.wait(ctx, "s1", 0, 10*time.Millisecond))

	// A waiter is woken by a change to its session only.
	got := make(chan uint64, 1)
	go func() { got <- w.wait(ctx, "s1", 0, time.Minute) }()
	w.observe(&lease.Command{Op: lease.OpAcquire}, lease.Result{Lease: &lease.Lease{SessionID: "s2"}})
	w.observe(&lease.Command{Op: lease.OpRevoke}, grant)
	select {
	case v := <-got:
		require.Equal(t, uint64(1), v)
	case <-time.After(10 * time.Second):
		t.Fatal("waiter not woken by a change to its session")
	}

	// Failed and duplicate commands change nothing.
	w.observe(&lease.Command{Op: lease.OpRevoke}, lease.Result{Err: lease.ErrStaleEpoch, Lease: grant.Lease})
	w.observe(&lease.Command{Op: lease.OpRevoke}, lease.Result{Duplicate: true, Lease: grant.Lease})
	require.Equal(t, uint64(1), w.wait(ctx, "s1", 1, 10*time.Millisecond))

	// Closing the session forgets it, even though the close released a
	// lease of it; a watcher ahead of the table returns at once.
	w.observe(&lease.Command{Op: lease.OpCloseSession, SessionID: "s1"},
		lease.Result{Released: []lease.Lease{{SessionID: "s1"}}})
	require.Equal(t, 1, w.size(), "only s2 is left")
	require.Equal(t, uint64(0), w.wait(ctx, "s1", 5, time.Minute))
}
