package raftstore

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/hashicorp/go-hclog"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/hashicorp/raft-wal/migrate"
	"github.com/stretchr/testify/require"
)

// TestBoltDataDirIsMigrated: a data dir holding an earlier release's bolt
// log (raft.db, no raft-wal) opens with its state, term and checkpoints,
// and is left with the WAL only. The bolt file is made the way that
// release wrote it: every entry and stable key of a real node's log.
func TestBoltDataDirIsMigrated(t *testing.T) {
	cfg := testConfig(t, "n1")
	cfg.Bootstrap = true
	s, err := Open(cfg)
	require.NoError(t, err)
	waitFor(t, waitTimeout, "leader", s.IsLeader)
	ctx := ctxT(t)
	sid := openSession(t, s, "w1")
	g, err := s.Acquire(ctx, "a1", "t1", api.AcquireRequest{SessionID: sid, Create: true, Profile: "long"})
	require.NoError(t, err)
	_, err = s.Checkpoint(ctx, "cp", "t1", api.CheckpointRequest{SessionID: sid, Epoch: g.Lease.Epoch, Step: "s1", Data: []byte("d1")})
	require.NoError(t, err)
	applied := s.AppliedIndex()
	term, err := s.logs.GetUint64([]byte("CurrentTerm"))
	require.NoError(t, err)
	require.NoError(t, s.Close())

	// Rewrite the data dir as the earlier release left it.
	walDir, boltPath := filepath.Join(cfg.DataDir, walDirName), filepath.Join(cfg.DataDir, boltFileName)
	src, err := openWAL(walDir, hclog.NewNullLogger())
	require.NoError(t, err)
	bolt, err := raftboltdb.NewBoltStore(boltPath)
	require.NoError(t, err)
	require.NoError(t, migrate.CopyStable(context.Background(), bolt, src, nil, nil, nil))
	require.NoError(t, migrate.CopyLogs(context.Background(), bolt, src, migrateBatchBytes, nil))
	require.NoError(t, src.Close())
	require.NoError(t, bolt.Close())
	require.NoError(t, os.RemoveAll(walDir))

	s, err = Open(cfg)
	require.NoError(t, err)
	defer s.Close()
	_, err = os.Stat(boltPath)
	require.ErrorIs(t, err, os.ErrNotExist, "the migrated bolt file is gone")
	got, err := s.logs.GetUint64([]byte("CurrentTerm"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, got, term, "the term survived the migration")
	waitFor(t, waitTimeout, "the log replayed", func() bool { return s.AppliedIndex() >= applied })
	waitFor(t, waitTimeout, "leader again", s.IsLeader)
	tk, err := s.Task(ctx, "t1", false)
	require.NoError(t, err)
	require.NotNil(t, tk.Checkpoint)
	require.Equal(t, []byte("d1"), tk.Checkpoint.Data)
	require.Equal(t, g.Lease.Epoch, tk.Checkpoint.Epoch)
}

// TestInterruptedMigrationIsRedone: a half-built WAL left by a crash
// during a migration is discarded and the bolt log is migrated again;
// a complete WAL beside a bolt file (a crash after the rename) wins.
func TestInterruptedMigrationIsRedone(t *testing.T) {
	dir := t.TempDir()
	boltPath := filepath.Join(dir, boltFileName)
	bolt, err := raftboltdb.NewBoltStore(boltPath)
	require.NoError(t, err)
	require.NoError(t, bolt.SetUint64([]byte("CurrentTerm"), 7))
	// No vote keys: a member that never voted has none.
	require.NoError(t, bolt.Close())
	require.NoError(t, os.MkdirAll(filepath.Join(dir, walDirName+".tmp"), 0o750))
	require.NoError(t, os.WriteFile(filepath.Join(dir, walDirName+".tmp", "junk"), []byte("x"), 0o600))

	w, err := openLogStore(dir, hclog.NewNullLogger())
	require.NoError(t, err)
	term, err := w.GetUint64([]byte("CurrentTerm"))
	require.NoError(t, err)
	require.Equal(t, uint64(7), term)
	require.NoError(t, w.Close())
	_, err = os.Stat(filepath.Join(dir, walDirName+".tmp"))
	require.ErrorIs(t, err, os.ErrNotExist)

	// A stale bolt file beside the WAL is the migration's leftover.
	bolt, err = raftboltdb.NewBoltStore(boltPath)
	require.NoError(t, err)
	require.NoError(t, bolt.SetUint64([]byte("CurrentTerm"), 3))
	require.NoError(t, bolt.Close())
	w, err = openLogStore(dir, hclog.NewNullLogger())
	require.NoError(t, err)
	defer w.Close()
	term, err = w.GetUint64([]byte("CurrentTerm"))
	require.NoError(t, err)
	require.Equal(t, uint64(7), term, "the WAL, not the leftover, is the log")
	_, err = os.Stat(boltPath)
	require.ErrorIs(t, err, os.ErrNotExist)
}
