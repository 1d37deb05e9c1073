package raftstore

import (
	"testing"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

// entryTypes lists the entry types in s's raft log.
func entryTypes(t *testing.T, s *Store) map[entryType]int {
	t.Helper()
	out := map[entryType]int{}
	first, err := s.logs.FirstIndex()
	require.NoError(t, err)
	last, err := s.logs.LastIndex()
	require.NoError(t, err)
	for i := first; i <= last && i > 0; i++ {
		var l raft.Log
		require.NoError(t, s.logs.GetLog(i, &l))
		if l.Type == raft.LogCommand && len(l.Data) > 0 {
			out[entryType(l.Data[0])]++
		}
	}
	return out
}

// TestMixedVersionsWritesWhatThePreviousReleaseReads: during a rolling
// upgrade (MixedVersions) expiry writes one plain command per transition,
// never a batch entry the previous release cannot read, and a checkpoint
// carries no seq window (the previous release would ignore it and accept
// what this one refuses); without it, expiry is batched and the window
// applies.
func TestMixedVersionsWritesWhatThePreviousReleaseReads(t *testing.T) {
	for _, mixed := range []bool{true, false} {
		c := newTestCluster(t, 1, func(cfg *Config) { cfg.MixedVersions = mixed })
		s := c.waitForLeader()
		ctx := ctxT(t)
		sid := openSession(t, s, "w1")
		g, err := s.Acquire(ctx, "a1", "t1", api.AcquireRequest{SessionID: sid, Create: true})
		require.NoError(t, err)
		_, err = s.Checkpoint(ctx, "cp", "t1", api.CheckpointRequest{SessionID: sid, Epoch: g.Lease.Epoch, Seq: lease.MaxCheckpointSeqJump + 1})
		if mixed {
			require.NoError(t, err, "no window while older members apply checkpoints")
		} else {
			require.ErrorIs(t, err, lease.ErrCheckpointSeqJump)
		}
		waitFor(t, waitTimeout, "the silent lease reclaimed", func() bool {
			tk, err := s.Task(ctx, "t1", false)
			require.NoError(t, err)
			return tk.Lease.Status == lease.StatusReclaimed
		})
		types := entryTypes(t, s)
		if mixed {
			require.Zero(t, types[entryBatch], "no batch entry: %v", types)
		} else {
			require.Positive(t, types[entryBatch], "expiry is batched: %v", types)
		}
	}
}
