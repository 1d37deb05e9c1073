package raftstore

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/stretchr/testify/require"
)

// saveBackup takes a backup through the leader and writes it to a file.
func saveBackup(t *testing.T, c *testCluster) (string, BackupHeader) {
	t.Helper()
	b, err := retryLeader(c, func(s *Store) (*Backup, error) { return s.Backup(ctxT(t)) })
	require.NoError(t, err)
	defer b.Release()
	path := filepath.Join(t.TempDir(), "fp.backup")
	f, err := os.Create(path)
	require.NoError(t, err)
	_, err = b.WriteTo(f)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	hdr, err := VerifyBackup(path)
	require.NoError(t, err)
	require.Equal(t, b.Header, hdr)
	return path, hdr
}

// The epoch-safety property of a restore: a backup is taken, the old
// cluster grants more epochs (and checkpoints), then a new cluster is
// restored from the backup; every epoch it grants is above every epoch
// the old cluster ever granted, sessions from before are gone, and the
// state of the backup (tasks, checkpoints) is there. The margin is set
// small here so the check is against the old cluster's real progress,
// not against the default's billions.
func TestRestoreGrantsAboveEveryEarlierEpoch(t *testing.T) {
	old := newTestCluster(t, 3, func(cfg *Config) { cfg.Version = "v0.0.1-test" })
	sid := old.openSession("w1")
	var maxEpoch uint64
	grant := func(c *testCluster, rid, task, session string) api.Grant {
		g := c.acquire(rid, task, session, "test")
		return g
	}
	for i := range 5 {
		g := grant(old, fmt.Sprintf("a%d", i), fmt.Sprintf("t%d", i), sid)
		maxEpoch = max(maxEpoch, g.Lease.Epoch)
	}
	_, err := retryLeader(old, func(s *Store) (*lease.Task, error) {
		return s.Checkpoint(ctxT(t), "cp0", "t0", api.CheckpointRequest{SessionID: sid, Epoch: maxEpoch - 4, Seq: 1, Step: "before-backup"})
	})
	require.NoError(t, err)

	path, hdr := saveBackup(t, old)
	require.Equal(t, "v0.0.1-test", hdr.Version)
	require.Equal(t, 5, hdr.Tasks)

	// After the backup: many more grants, so the old cluster's index runs
	// well past the backup's.
	for i := range 40 {
		g := grant(old, fmt.Sprintf("b%d", i), fmt.Sprintf("after%d", i), sid)
		maxEpoch = max(maxEpoch, g.Lease.Epoch)
	}
	require.Greater(t, maxEpoch, hdr.Index+30, "the old cluster moved on after the backup")
	old.closeAll()

	margin := maxEpoch - hdr.Index + 1 // just enough: new epochs start at maxEpoch+2
	restored := newRestoredCluster(t, path, margin)
	s := restored.waitForLeader()
	require.NoError(t, s.Ready())

	// The old session is gone: not revived by the restore.
	_, err = s.Heartbeat(ctxT(t), sid, api.HeartbeatRequest{})
	require.ErrorIs(t, err, lease.ErrSessionNotFound)

	// Old tasks keep their checkpoint; their leases were expired.
	tk, err := s.Task(ctxT(t), "t0", false)
	require.NoError(t, err)
	require.NotNil(t, tk.Checkpoint)
	require.Equal(t, "before-backup", tk.Checkpoint.Step)
	_, err = s.Task(ctxT(t), "after0", false)
	require.ErrorIs(t, err, lease.ErrTaskNotFound, "what the old cluster did after the backup is lost")

	nsid := restored.openSession("w2")
	for i := range 5 {
		id := fmt.Sprintf("t%d", i)
		var g api.Grant
		try := 0
		waitFor(t, waitTimeout, "the restored cluster reclaims "+id, func() bool {
			var err error
			try++ // a fresh request id each time: a refusal is de-duplicated too
			g, err = s.Acquire(ctxT(t), fmt.Sprintf("r%s.%d", id, try), id, api.AcquireRequest{SessionID: nsid})
			return err == nil
		})
		require.Greater(t, g.Lease.Epoch, maxEpoch, "task %s: a restored grant is above every epoch granted before", id)
	}
	for i := range 3 {
		g := grant(restored, fmt.Sprintf("n%d", i), fmt.Sprintf("after%d", i), nsid)
		require.Greater(t, g.Lease.Epoch, maxEpoch, "a re-created task's grant is above its old epochs")
	}

	// Members joining with empty data dirs receive the restored state.
	for _, id := range []string{"r1", "r2"} {
		cfg := testConfig(t, id)
		restored.cfgs = append(restored.cfgs, cfg)
		restored.nodes = append(restored.nodes, nil)
		restored.parts = append(restored.parts, nil)
		restored.start(len(restored.cfgs) - 1)
		join := api.JoinRequest{ID: id, RaftAddr: restored.node(len(restored.cfgs) - 1).RaftAddr(), HTTPAddr: cfg.HTTPAddr}
		_, err := retryLeader(restored, func(s *Store) (struct{}, error) { return struct{}{}, s.Join(ctxT(t), join) })
		require.NoError(t, err)
	}
	restored.waitConverged()
	restored.requireSameHash()
	tk, err = restored.node(2).Task(ctxT(t), "t0", true)
	require.NoError(t, err)
	require.Equal(t, "before-backup", tk.Checkpoint.Step)
}

// newRestoredCluster starts a one-node cluster restored from path.
func newRestoredCluster(t *testing.T, path string, margin uint64) *testCluster {
	t.Helper()
	c := &testCluster{t: t, cfgs: make([]Config, 1), nodes: make([]*Store, 1), parts: make([]*partTransport, 1)}
	t.Cleanup(c.closeAll)
	cfg := testConfig(t, "r0")
	cfg.Restore = Restore{File: path, EpochMargin: margin}
	c.cfgs[0] = cfg
	c.start(0)
	return c
}

// A restore refuses a data dir that already holds state, and a backup cut
// short or changed, before writing anything.
func TestRestoreRefusals(t *testing.T) {
	c := newTestCluster(t, 1)
	c.openSession("w")
	path, hdr := saveBackup(t, c)
	c.closeAll()

	used := testConfig(t, "u")
	used.Bootstrap = true
	s, err := Open(used)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	used.Restore = Restore{File: path}
	_, err = Open(used)
	require.ErrorIs(t, err, ErrConfig)
	require.Contains(t, err.Error(), "already holds raft state")

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	for name, bad := range map[string][]byte{
		"cut short": data[:len(data)-10],
		"changed":   append(append([]byte{}, data[:20]...), append([]byte{'X'}, data[21:]...)...),
		"empty":     nil,
	} {
		p := filepath.Join(t.TempDir(), "bad")
		require.NoError(t, os.WriteFile(p, bad, 0o600))
		_, err := VerifyBackup(p)
		require.ErrorIs(t, err, ErrBackup, name)
		cfg := testConfig(t, "x")
		cfg.Restore = Restore{File: p}
		_, err = Open(cfg)
		require.ErrorIs(t, err, ErrBackup, name)
		entries, err := os.ReadDir(filepath.Join(cfg.DataDir, "snapshots"))
		require.NoError(t, err)
		require.Empty(t, entries, "%s: nothing restored", name)
	}

	// The default margin grows with the backup's age.
	f1, err := RestoreFloor(hdr, 0, hdr.SavedAt)
	require.NoError(t, err)
	require.Equal(t, hdr.Index+DefaultRestoreMinMargin, f1)
	f2, err := RestoreFloor(hdr, 0, hdr.SavedAt.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, hdr.Index+3600*DefaultRestoreIndexRate, f2)
	_, err = RestoreFloor(hdr, 1<<60, hdr.SavedAt)
	require.True(t, errors.Is(err, ErrConfig))
}

// A backup taken while grants go on is one consistent state: it holds
// exactly the tasks its header counts, none with an epoch above its
// index, and every grant acknowledged before the backup started is in it.
func TestBackupUnderLoadIsConsistent(t *testing.T) {
	c := newTestCluster(t, 3)
	sid := c.openSession("w1")
	var mu sync.Mutex
	granted := map[string]uint64{} // task -> epoch, acknowledged
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			id := fmt.Sprintf("load%d", i)
			g, err := retryLeader(c, func(s *Store) (api.Grant, error) {
				return s.Acquire(ctxT(t), "l"+id, id, api.AcquireRequest{SessionID: sid, Create: true, Profile: "long"})
			})
			if err != nil {
				t.Errorf("acquire %s: %v", id, err)
				return
			}
			mu.Lock()
			granted[id] = g.Lease.Epoch
			mu.Unlock()
		}
	})
	waitFor(t, waitTimeout, "some load", func() bool { mu.Lock(); defer mu.Unlock(); return len(granted) >= 20 })
	mu.Lock()
	before := maps.Clone(granted)
	mu.Unlock()
	path, hdr := saveBackup(t, c)
	waitFor(t, waitTimeout, "load after the backup", func() bool { mu.Lock(); defer mu.Unlock(); return len(granted) >= len(before)+20 })
	close(stop)
	wg.Wait()

	f, _, rd, _, err := openBackup(path)
	require.NoError(t, err)
	defer f.Close()
	fm := newFSM(testLogger(t))
	require.NoError(t, fm.Restore(io.NopCloser(rd)))
	n := 0
	fm.read(func(m *lease.Model) {
		for _, tk := range m.Tasks(lease.TaskFilter{}) {
			n++
			require.LessOrEqual(t, tk.MaxEpoch, hdr.Index, "task %s", tk.ID)
		}
		for id, epoch := range before {
			tk, ok := m.Task(id)
			require.True(t, ok, "%s was acknowledged before the backup", id)
			require.Equal(t, epoch, tk.Lease.Epoch)
		}
	})
	require.Equal(t, hdr.Tasks, n)
}
