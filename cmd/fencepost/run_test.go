package main

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/cluster"
	"github.com/fencepost/fencepost/raftstore/httpapi/httpapitest"
)

// runResult is how an in-process `fencepost run` ended.
type runResult struct {
	code           int
	stdout, stderr string
}

// startRun runs `fencepost run ARGS...` in-process against cluster ep on
// free loopback ports and returns its result channel and its control URL.
func startRun(t testing.TB, ep string, args ...string) (<-chan runResult, string) {
	t.Helper()
	control := freeAddrTB(t)
	full := append([]string{"run", "--cluster", ep, "--proxy-addr", freeAddrTB(t), "--control-addr", control,
		"--log-level", "warn"}, args...)
	ch := make(chan runResult, 1)
	go func() {
		var out, errOut bytes.Buffer
		code := run(t.Context(), full, &out, &errOut)
		ch <- runResult{code, out.String(), errOut.String()}
	}()
	return ch, "http://" + control
}

func waitRun(t *testing.T, ch <-chan runResult) runResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("fencepost run did not return")
		return runResult{}
	}
}

// readPid polls for the pid a child wrote.
func readPid(t testing.TB, path string) int {
	t.Helper()
	var pid int
	httpapitest.WaitFor(t, "the child's pid", func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		fields := strings.Fields(string(b))
		if len(fields) == 0 {
			return false
		}
		pid, err = strconv.Atoi(fields[0])
		return err == nil
	})
	return pid
}

// otherWorker is a second worker's session, straight on the cluster.
func otherWorker(t testing.TB, ep string) (*cluster.Client, string) {
	t.Helper()
	c, err := cluster.New(cluster.Config{Endpoints: []string{ep}, Timeout: 2 * time.Second})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	s, err := c.OpenSession(t.Context(), api.OpenSessionRequest{WorkerID: "other"})
	require.NoError(t, err)
	return c, s.SessionID
}

// SIGKILL of a `fencepost run` child: its task is claimable by another
// worker at once, not after TTL + grace (the sidecar lives on).
func TestRunKilledChildTaskClaimableAtOnce(t *testing.T) {
	ep := httpapitest.StartCluster(t, 1, zap.WarnLevel).Endpoints()[0]
	pidFile := filepath.Join(t.TempDir(), "pid")
	ch, _ := startRun(t, ep, "--task", "t1", "--", "/bin/sh", "-c", `echo $$ "$FENCEPOST_TASK" "$FENCEPOST_EPOCH" > `+pidFile+`; exec sleep 60`)
	pid := readPid(t, pidFile)
	b, _ := os.ReadFile(pidFile)
	require.Contains(t, string(b), " t1 ")
	c, sid := otherWorker(t, ep)
	_, err := c.Acquire(t.Context(), "t1", api.AcquireRequest{SessionID: sid})
	require.ErrorIs(t, err, lease.ErrLeaseHeld, "the child's sidecar holds it")

	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	killed := time.Now()
	var g api.Grant
	deadline := killed.Add(3 * time.Second) // far below TTL + grace (26 s)
	for {
		g, err = c.Acquire(t.Context(), "t1", api.AcquireRequest{SessionID: sid})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, err, "claimable %v after the kill", time.Since(killed))
	tk, err := c.Task(t.Context(), "t1", false)
	require.NoError(t, err)
	require.NotEmpty(t, tk.History())
	prev := tk.History()[len(tk.History())-1]
	require.Equal(t, lease.ReasonWorkerExited, prev.Reason, "the lease ended for the worker's exit")
	require.Greater(t, g.Lease.Epoch, prev.Epoch)
	r := waitRun(t, ch)
	require.Equal(t, 128+int(syscall.SIGKILL), r.code, r.stderr)
}

// freeAddrTB is freeAddr for benchmarks too.
func freeAddrTB(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func TestRunNeedsACommand(t *testing.T) {
	code, _, errOut := runCLI(t, "run", "--cluster", "127.0.0.1:1")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "give the worker's command after --")
	require.Equal(t, 1, strings.Count(errOut, "\n"))
}

// worker.restart on-failure: the crashed child's lease is given back, the
// next child runs under a higher epoch with the checkpoint the first one
// made, and a write under the old epoch is refused.
func TestRunRestartResumesUnderAHigherEpoch(t *testing.T) {
	ep := httpapitest.StartCluster(t, 1, zap.WarnLevel).Endpoints()[0]
	dir := t.TempDir()
	log, mark, goFile := filepath.Join(dir, "log"), filepath.Join(dir, "mark"), filepath.Join(dir, "go")
	script := `echo "$FENCEPOST_EPOCH $FENCEPOST_CHECKPOINT" >> ` + log + `
if [ ! -e ` + mark + ` ]; then : > ` + mark + `; while [ ! -e ` + goFile + ` ]; do sleep 0.02; done; exit 3; fi
exit 0`
	ch, control := startRun(t, ep, "--task", "t1", "--worker-restart", "on-failure", "--worker-restart-backoff", "20ms",
		"--", "/bin/sh", "-c", script)
	httpapitest.WaitFor(t, "the first child", func() bool { _, err := os.Stat(mark); return err == nil })
	req, err := http.NewRequest("POST", control+"/v1/checkpoint", strings.NewReader(`{"step":"s1","data":{"page":3}}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.NoError(t, os.WriteFile(goFile, nil, 0o600))

	r := waitRun(t, ch)
	require.Equal(t, exitOK, r.code, r.stderr)
	b, err := os.ReadFile(log)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	require.Len(t, lines, 2, string(b))
	first, second := strings.Fields(lines[0]), strings.Fields(lines[1])
	e1, _ := strconv.ParseUint(first[0], 10, 64)
	e2, _ := strconv.ParseUint(second[0], 10, 64)
	require.Greater(t, e2, e1, "the restarted child is a new owner")
	require.Len(t, first, 1, "no checkpoint at first")
	require.Equal(t, `{"page":3}`, second[1], "the second child resumes from the first one's checkpoint")

	c, _ := otherWorker(t, ep)
	tk, err := c.Task(t.Context(), "t1", false)
	require.NoError(t, err)
	require.Equal(t, lease.TaskCompleted, tk.State, "exit 0 completes")
	var old *lease.Lease
	for i := range tk.History() {
		if tk.History()[i].Epoch == e1 {
			old = &tk.History()[i]
		}
	}
	require.NotNil(t, old)
	require.Equal(t, lease.ReasonWorkerExited, old.Reason)
	_, err = c.Checkpoint(t.Context(), "t1", api.CheckpointRequest{SessionID: old.SessionID, Epoch: e1, Step: "zombie"})
	require.ErrorIs(t, err, lease.ErrStaleEpoch, "the old epoch's write is refused")
}
