package raftstore

import (
	"fmt"
	"testing"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/stretchr/testify/require"
)

// alarmTotal sums every kind of the double-execution alarm.
func alarmTotal(t *testing.T, s *Store) float64 {
	var n float64
	for _, k := range alarmKinds {
		n += metricValue(t, s.m.alarms.WithLabelValues(k))
	}
	return n
}

func TestHotStandbyIsContentionNotAnAlarm(t *testing.T) {
	c := newTestCluster(t, 1)
	s := c.waitForLeader()
	ctx := ctxT(t)
	owner, standby := openSession(t, s, "owner"), openSession(t, s, "standby")
	_, err := s.Acquire(ctx, "a-owner", "t1", api.AcquireRequest{SessionID: owner, Create: true})
	require.NoError(t, err)

	// A standby retrying its acquire, as a one-task sidecar does while
	// another worker holds the task, and claims that find it held.
	const tries = 5
	for i := range tries {
		_, err := s.Acquire(ctx, fmt.Sprintf("a-standby-%d", i), "t1", api.AcquireRequest{SessionID: standby})
		require.ErrorIs(t, err, lease.ErrLeaseHeld)
	}
	// A retried request id is the same attempt: counted once.
	_, err = s.Acquire(ctx, "a-standby-0", "t1", api.AcquireRequest{SessionID: standby})
	require.ErrorIs(t, err, lease.ErrLeaseHeld)
	// The owner's own repeat is neither.
	_, err = s.Acquire(ctx, "a-owner-again", "t1", api.AcquireRequest{SessionID: owner})
	require.NoError(t, err)

	require.Equal(t, float64(tries), metricValue(t, s.m.acquireContended))
	require.Zero(t, alarmTotal(t, s), "a standby waiting for a held task is not a double execution")
}

func TestSupersededOwnerActingRaisesTheAlarm(t *testing.T) {
	c := newTestCluster(t, 1)
	s := c.waitForLeader()
	ctx := ctxT(t)
	old, next := openSession(t, s, "old"), openSession(t, s, "next")
	g1, err := s.Acquire(ctx, "a-old", "t1", api.AcquireRequest{SessionID: old, Create: true})
	require.NoError(t, err)
	_, err = s.Revoke(ctx, "rv", "t1", api.RevokeRequest{Reason: "test"})
	require.NoError(t, err)

	// Revoked but not re-granted: the old owner's checkpoint is refused
	// (lease not active) and nobody else acts for the task yet.
	_, err = s.Checkpoint(ctx, "cp-before", "t1", api.CheckpointRequest{SessionID: old, Epoch: g1.Lease.Epoch})
	require.ErrorIs(t, err, lease.ErrLeaseNotActive)
	require.Zero(t, alarmTotal(t, s))

	g2, err := s.Acquire(ctx, "a-next", "t1", api.AcquireRequest{SessionID: next})
	require.NoError(t, err)
	require.Greater(t, g2.Lease.Epoch, g1.Lease.Epoch)

	// Each holder command of the old owner now is a second worker at work.
	superseded := func() float64 { return metricValue(t, s.m.alarms.WithLabelValues(alarmSupersededOwner)) }
	_, err = s.Checkpoint(ctx, "cp-old", "t1", api.CheckpointRequest{SessionID: old, Epoch: g1.Lease.Epoch, Step: "late"})
	require.ErrorIs(t, err, lease.ErrStaleEpoch)
	require.Equal(t, 1.0, superseded())
	_, err = s.Checkpoint(ctx, "cp-old", "t1", api.CheckpointRequest{SessionID: old, Epoch: g1.Lease.Epoch, Step: "late"})
	require.ErrorIs(t, err, lease.ErrStaleEpoch)
	require.Equal(t, 1.0, superseded(), "a retried request id is counted once")
	_, err = s.Release(ctx, "rl-old", "t1", api.ReleaseRequest{SessionID: old, Epoch: g1.Lease.Epoch, Outcome: lease.OutcomeCompleted})
	require.ErrorIs(t, err, lease.ErrStaleEpoch)
	require.Equal(t, 2.0, superseded())

	// An epoch nobody was granted is a confused caller, not a second owner.
	_, err = s.Checkpoint(ctx, "cp-bogus", "t1", api.CheckpointRequest{SessionID: old, Epoch: g2.Lease.Epoch + 1000})
	require.ErrorIs(t, err, lease.ErrStaleEpoch)
	require.Equal(t, 2.0, superseded())
	require.Zero(t, metricValue(t, s.m.acquireContended))

	// The new owner works undisturbed.
	_, err = s.Checkpoint(ctx, "cp-next", "t1", api.CheckpointRequest{SessionID: next, Epoch: g2.Lease.Epoch, Step: "on"})
	require.NoError(t, err)
	require.Equal(t, 2.0, superseded())
}
