package raftstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
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

// TestTailTruncationSurvivesReopen: raft truncates the log's tail when a
// follower drops an uncommitted suffix a new leader overwrote; the WAL
// seals the tail segment there. The segment must reopen with every entry
// below the cut and the ones appended after it (hashicorp/raft-wal#31:
// v0.4.0 sealed it without an index block and the reopen failed).
func TestTailTruncationSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	w, err := openWAL(dir, hclog.NewNullLogger())
	require.NoError(t, err)
	appendLogs(t, w, 1, 10, 1)
	require.NoError(t, w.DeleteRange(6, 10))
	appendLogs(t, w, 6, 8, 2) // the new leader's entries at the same indexes
	require.NoError(t, w.Close())

	w, err = openWAL(dir, hclog.NewNullLogger())
	require.NoError(t, err, "the truncated segment reopens")
	defer w.Close()
	first, err := w.FirstIndex()
	require.NoError(t, err)
	last, err := w.LastIndex()
	require.NoError(t, err)
	require.Equal(t, []uint64{1, 8}, []uint64{first, last})
	for i := uint64(1); i <= 8; i++ {
		var l raft.Log
		require.NoError(t, w.GetLog(i, &l), "entry %d", i)
		term := uint64(1)
		if i >= 6 {
			term = 2
		}
		require.Equal(t, term, l.Term, "entry %d is the one written last", i)
		require.Equal(t, fmt.Sprintf("entry %d term %d", i, term), string(l.Data))
	}
	appendLogs(t, w, 9, 9, 2) // and the reopened log takes appends
}

// TestReopenInOneProcess: a member closed and reopened in the same
// process (tests, an in-place restart) gets its log back at once; v0.4.0's
// Close left the meta store's lock held and the second open waited for it
// forever.
func TestReopenInOneProcess(t *testing.T) {
	dir := t.TempDir()
	for round := 0; round < 3; round++ {
		opened := make(chan error, 1)
		var w *walStore
		go func() {
			var err error
			w, err = openWAL(dir, hclog.NewNullLogger())
			opened <- err
		}()
		select {
		case err := <-opened:
			require.NoError(t, err, "round %d", round)
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the WAL did not reopen within 10s", round)
		}
		base := uint64(round*3 + 1)
		appendLogs(t, w, base, base+2, 1)
		last, err := w.LastIndex()
		require.NoError(t, err)
		require.Equal(t, base+2, last, "round %d", round)
		require.NoError(t, w.Close())
	}
}

// appendLogs stores entries from..to (inclusive) of term, one per call as
// raft's leader does for a lone write.
func appendLogs(t *testing.T, w *walStore, from, to, term uint64) {
	t.Helper()
	for i := from; i <= to; i++ {
		require.NoError(t, w.StoreLogs([]*raft.Log{{Index: i, Term: term, Type: raft.LogCommand,
			Data: []byte(fmt.Sprintf("entry %d term %d", i, term))}}), "entry %d", i)
	}
}
