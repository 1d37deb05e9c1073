package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/raftstore"
)

// syncBuffer is a bytes.Buffer safe for a server's concurrent logging.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runServerCmd runs 'fencepost server ARGS' in-process until the test
// stops it (the returned func cancels and waits, returning the exit code).
func runServerCmd(t *testing.T, args ...string) (stop func() int, logs *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	logs = &syncBuffer{}
	done := make(chan int, 1)
	go func() { done <- run(ctx, append([]string{"server"}, args...), &syncBuffer{}, logs) }()
	var once sync.Once
	code := 0
	stop = func() int {
		once.Do(func() { cancel(); code = <-done })
		return code
	}
	t.Cleanup(func() { stop() })
	return stop, logs
}

// TestCtlSnapshotSaveAndServerRestore: 'ctl snapshot save' writes a
// verified backup; 'server --restore' starts a new cluster from it whose
// grants are above the backup's index plus the margin, without the old
// sessions; a restart that keeps --restore starts from its data dir; a
// damaged backup is refused with exit 2 and one line.
func TestCtlSnapshotSaveAndServerRestore(t *testing.T) {
	ep := startCtlCluster(t)
	sess := ctlJSON[api.Session](t, ep, "sessions", "open", "--worker", "w1")
	g := ctlJSON[api.Grant](t, ep, "acquire", "job", "--session", sess.SessionID, "--create")
	file := filepath.Join(t.TempDir(), "fp.backup")
	saved := ctlJSON[snapshotSaved](t, ep, "snapshot", "save", file)
	require.Equal(t, 1, saved.Tasks)
	require.GreaterOrEqual(t, saved.Index, g.Lease.Epoch)
	hdr, err := raftstore.VerifyBackup(file)
	require.NoError(t, err)
	require.Equal(t, saved.BackupHeader, hdr)
	leftovers, err := filepath.Glob(file + ".partial-*")
	require.NoError(t, err)
	require.Empty(t, leftovers, "no partial file is left behind")

	dir := t.TempDir()
	http, raft := freeAddr(t), freeAddr(t)
	args := []string{"--node-id", "r1", "--data-dir", dir, "--http-addr", http, "--raft-addr", raft,
		"--restore", file, "--restore-epoch-margin", "1000"}
	stop, logs := runServerCmd(t, args...)
	waitReady(t, http, logs)
	ns := ctlJSON[api.Session](t, http, "sessions", "open", "--worker", "w2")
	ctlFails(t, http, exitNotFound, []string{"heartbeat", "--session", sess.SessionID}, "session")
	task := ctlJSON[lease.Task](t, http, "tasks", "get", "job")
	require.Equal(t, lease.StatusExpired, task.Lease.Status, "the old lease is expired by the restore")
	fresh := ctlJSON[api.Grant](t, http, "acquire", "fresh", "--session", ns.SessionID, "--create")
	require.Greater(t, fresh.Lease.Epoch, hdr.Index+1000)
	require.Equal(t, exitOK, stop(), logs.String())

	// Restarting with the same --restore starts from the data dir.
	stop, logs = runServerCmd(t, args...)
	waitReady(t, http, logs)
	again := ctlJSON[lease.Task](t, http, "tasks", "get", "fresh")
	require.Equal(t, fresh.Lease.Epoch, again.Lease.Epoch, "the restored cluster's own state survives its restart")
	require.Equal(t, exitOK, stop(), logs.String())

	data, err := os.ReadFile(file)
	require.NoError(t, err)
	bad := filepath.Join(t.TempDir(), "bad.backup")
	require.NoError(t, os.WriteFile(bad, data[:len(data)/2], 0o600))
	code, _, errOut := runCLI(t, "server", "--node-id", "r2", "--data-dir", t.TempDir(), "--restore", bad)
	require.Equal(t, exitUsage, code, errOut)
	require.Equal(t, 1, strings.Count(errOut, "\n"), errOut)
	require.Contains(t, errOut, "--restore")
	require.Contains(t, errOut, "checksum")
}

// waitReady polls the member's /readyz through ctl until it answers.
func waitReady(t *testing.T, ep string, logs *syncBuffer) {
	t.Helper()
	ok := false
	// Each ctl call retries for up to its --timeout; the deadline bounds
	// the whole wait.
	for deadline := time.Now().Add(ctlPollWait); !ok && time.Now().Before(deadline); {
		code, _, _ := ctl(t, ep, "status", "--timeout", "500ms")
		ok = code == exitOK
	}
	require.True(t, ok, "member at %s never became ready; logs:\n%s", ep, logs.String())
}
