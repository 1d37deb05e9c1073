package workertie

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fencepost/fencepost/fence/lease"
	"github.com/stretchr/testify/require"
)

type runResult struct {
	code int
	err  error
}

// start runs s in the background and returns its result channel.
func start(ctx context.Context, s *Supervisor) <-chan runResult {
	ch := make(chan runResult, 1)
	go func() {
		code, err := s.Run(ctx)
		ch <- runResult{code, err}
	}()
	return ch
}

func result(t *testing.T, ch <-chan runResult) runResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("supervisor did not return")
		return runResult{}
	}
}

func TestRunExitZeroCompletes(t *testing.T) {
	setHelper(t, "exit", "WORKERTIE_CODE", "0")
	k := newFakeKeeper("t1")
	r := result(t, start(t.Context(), &Supervisor{Keeper: k, Argv: helperArgv(t)}))
	require.NoError(t, r.err)
	require.Equal(t, 0, r.code)
	require.Equal(t, 1, k.done())
	require.Empty(t, k.reasons())
}

func TestRunExitZeroCanGiveBack(t *testing.T) {
	setHelper(t, "exit", "WORKERTIE_CODE", "0")
	k := newFakeKeeper("t1")
	r := result(t, start(t.Context(), &Supervisor{Keeper: k, Argv: helperArgv(t), Config: Config{OnSuccess: OnSuccessGiveBack}}))
	require.Equal(t, 0, r.code)
	require.Equal(t, []string{lease.ReasonWorkerExited}, k.reasons())
}

func TestRunCrashGivesBackAndKeepsTheExitCode(t *testing.T) {
	setHelper(t, "exit", "WORKERTIE_CODE", "3")
	k := newFakeKeeper("t1")
	r := result(t, start(t.Context(), &Supervisor{Keeper: k, Argv: helperArgv(t)}))
	require.NoError(t, r.err)
	require.Equal(t, 3, r.code)
	require.Equal(t, []string{lease.ReasonWorkerExited}, k.reasons())
	require.Zero(t, k.done())
}

// SIGKILL of the child (the worker-kill fault): the lease is given back at
// once, and the sidecar's exit code says the child was killed.
func TestRunKilledChildGivesBackAtOnce(t *testing.T) {
	out := setHelper(t, "sleep")
	k := newFakeKeeper("t1")
	var pid atomic.Int64
	ch := start(t.Context(), &Supervisor{Keeper: k, Argv: helperArgv(t), Started: func(p int, _ Grant) { pid.Store(int64(p)) }})
	waitFor(t, 10*time.Second, "child ready", func() bool { b, _ := os.ReadFile(out); return strings.Contains(string(b), "ready") })
	require.NoError(t, syscall.Kill(int(pid.Load()), syscall.SIGKILL))
	waitFor(t, 2*time.Second, "lease given back", func() bool { return len(k.reasons()) == 1 })
	r := result(t, ch)
	require.Equal(t, 128+int(syscall.SIGKILL), r.code)
	require.Equal(t, []string{lease.ReasonWorkerExited}, k.reasons())
}

// A lost lease terminates the child (SIGTERM), which may exit cleanly; the
// run does not count that as success.
func TestRunLostLeaseTerminatesTheChild(t *testing.T) {
	out := setHelper(t, "wait-term")
	k := newFakeKeeper("t1")
	ch := start(t.Context(), &Supervisor{Keeper: k, Argv: helperArgv(t)})
	waitFor(t, 10*time.Second, "child ready", func() bool { return strings.Contains(readOutOK(out), "ready") })
	k.lose("revoked")
	r := result(t, ch)
	require.Equal(t, 0, r.code)
	require.Contains(t, readOut(t, out), "got SIGTERM")
	require.Zero(t, k.done(), "a lost lease is never completed")
}

// A child that ignores SIGTERM is killed after the kill grace.
func TestRunKillGrace(t *testing.T) {
	out := setHelper(t, "ignore-term")
	k := newFakeKeeper("t1")
	ch := start(t.Context(), &Supervisor{Keeper: k, Argv: helperArgv(t), Config: Config{KillGrace: 200 * time.Millisecond}})
	waitFor(t, 10*time.Second, "child ready", func() bool { return strings.Contains(readOutOK(out), "ready") })
	k.lose("lost")
	r := result(t, ch)
	require.Equal(t, 128+int(syscall.SIGKILL), r.code)
}

// With on_lost none the child runs on (its writes are blocked by the
// sidecar); the run ends when the child does.
func TestRunOnLostNone(t *testing.T) {
	out := setHelper(t, "wait-term")
	k := newFakeKeeper("t1")
	sigs := make(chan os.Signal, 1)
	ch := start(t.Context(), &Supervisor{Keeper: k, Argv: helperArgv(t), Signals: sigs, Config: Config{OnLost: OnLostNone}})
	waitFor(t, 10*time.Second, "child ready", func() bool { return strings.Contains(readOutOK(out), "ready") })
	k.lose("lost")
	select {
	case r := <-ch:
		t.Fatalf("the child was ended: %+v", r)
	case <-time.After(300 * time.Millisecond):
	}
	require.NotContains(t, readOut(t, out), "got SIGTERM")
	sigs <- syscall.SIGTERM
	require.Equal(t, 0, result(t, ch).code)
}

// A signal sent to the sidecar goes to the child; a stop signal ends the
// run even with restart on-failure.
func TestRunForwardsSignals(t *testing.T) {
	out := setHelper(t, "sleep")
	k := newFakeKeeper("t1")
	sigs := make(chan os.Signal, 1)
	ch := start(t.Context(), &Supervisor{Keeper: k, Argv: helperArgv(t), Signals: sigs, Config: Config{Restart: RestartOnFailure}})
	waitFor(t, 10*time.Second, "child ready", func() bool { return strings.Contains(readOutOK(out), "ready") })
	sigs <- syscall.SIGTERM
	r := result(t, ch)
	require.Equal(t, 128+int(syscall.SIGTERM), r.code)
	require.Equal(t, []string{lease.ReasonWorkerExited}, k.reasons())
}

// Restart on-failure: the second child runs under a higher epoch and gets
// the checkpoint to resume from.
func TestRunRestartResumesUnderAHigherEpoch(t *testing.T) {
	dir := t.TempDir()
	out := setHelper(t, "fail-once", "WORKERTIE_MARK", dir+"/mark")
	k := newFakeKeeper("t1")
	k.checkpoint = `{"step":2}`
	var epochs []uint64
	r := result(t, start(t.Context(), &Supervisor{Keeper: k, Argv: helperArgv(t),
		Config:  Config{Restart: RestartOnFailure, RestartBackoff: 10 * time.Millisecond},
		Started: func(_ int, g Grant) { epochs = append(epochs, g.Epoch) }}))
	require.Equal(t, 0, r.code)
	require.Len(t, epochs, 2)
	require.Greater(t, epochs[1], epochs[0], "a restarted worker is a new owner")
	require.Equal(t, "epoch=10 checkpoint={\"step\":2}\nepoch=20 checkpoint={\"step\":2}\n", readOut(t, out))
	require.Equal(t, []string{lease.ReasonWorkerExited}, k.reasons())
	require.Equal(t, 1, k.done())
}

// The child's whole process group goes with it: nothing it started runs on.
func TestRunKillsWhatTheChildLeft(t *testing.T) {
	dir := t.TempDir()
	pidFile := dir + "/gc.pid"
	k := newFakeKeeper("t1")
	argv := []string{"/bin/sh", "-c", "sleep 60 & echo $! > " + pidFile + "; exit 1"}
	r := result(t, start(t.Context(), &Supervisor{Keeper: k, Argv: argv}))
	require.Equal(t, 1, r.code)
	b, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	gc := strings.TrimSpace(string(b))
	waitFor(t, 5*time.Second, "grandchild gone", func() bool {
		st, err := os.ReadFile("/proc/" + gc + "/stat")
		// Gone, or a zombie waiting for init to reap it.
		return err != nil || strings.Contains(string(st), ") Z ")
	})
}

func TestRunEnvironment(t *testing.T) {
	out := setHelper(t, "env")
	k := newFakeKeeper("t1")
	k.checkpoint = `{"a":1}`
	env := func(g Grant) Env {
		return Env{ControlURL: "http://127.0.0.1:7481", ProxyURL: "http://127.0.0.1:7480", NoProxy: "127.0.0.1",
			CABundle: "/tmp/bundle.pem", Grant: g}
	}
	r := result(t, start(t.Context(), &Supervisor{Keeper: k, Argv: helperArgv(t), Env: env}))
	require.Equal(t, 0, r.code)
	got := readOut(t, out)
	for _, want := range []string{"FENCEPOST_CONTROL_URL=http://127.0.0.1:7481", "FENCEPOST_TASK=t1", "FENCEPOST_EPOCH=10",
		`FENCEPOST_CHECKPOINT={"a":1}`, "HTTP_PROXY=http://127.0.0.1:7480", "http_proxy=http://127.0.0.1:7480",
		"HTTPS_PROXY=http://127.0.0.1:7480", "https_proxy=http://127.0.0.1:7480", "NO_PROXY=127.0.0.1", "no_proxy=127.0.0.1",
		"SSL_CERT_FILE=/tmp/bundle.pem", "REQUESTS_CA_BUNDLE=/tmp/bundle.pem", "CURL_CA_BUNDLE=/tmp/bundle.pem",
		"NODE_EXTRA_CA_CERTS=/tmp/bundle.pem", "NODE_USE_ENV_PROXY=1"} {
		require.Contains(t, got, want+"\n")
	}
}

func TestRunCommandNotFound(t *testing.T) {
	k := newFakeKeeper("t1")
	r := result(t, start(t.Context(), &Supervisor{Keeper: k, Argv: []string{"/nonexistent/worker"}}))
	require.Equal(t, 127, r.code)
	require.ErrorContains(t, r.err, "/nonexistent/worker")
	require.Equal(t, []string{lease.ReasonWorkerExited}, k.reasons(), "a worker that never started holds nothing")
}

// Shutting the sidecar down terminates the child and gives back.
func TestRunContextEndTerminates(t *testing.T) {
	out := setHelper(t, "wait-term")
	k := newFakeKeeper("t1")
	ctx, cancel := context.WithCancel(t.Context())
	ch := start(ctx, &Supervisor{Keeper: k, Argv: helperArgv(t), Config: Config{Restart: RestartOnFailure}})
	waitFor(t, 10*time.Second, "child ready", func() bool { return strings.Contains(readOutOK(out), "ready") })
	cancel()
	r := result(t, ch)
	require.Equal(t, 0, r.code)
	require.Equal(t, []string{lease.ReasonWorkerExited}, k.reasons())
}

func readOutOK(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// A lost lease is not a crash: even with restart on-failure the run ends
// (a revoke must stick).
func TestRunLostLeaseIsNotRestarted(t *testing.T) {
	out := setHelper(t, "wait-term")
	k := newFakeKeeper("t1")
	starts := 0
	ch := start(t.Context(), &Supervisor{Keeper: k, Argv: helperArgv(t), Config: Config{Restart: RestartOnFailure, RestartBackoff: time.Millisecond},
		Started: func(int, Grant) { starts++ }})
	waitFor(t, 10*time.Second, "child ready", func() bool { return strings.Contains(readOutOK(out), "ready") })
	k.lose("revoked")
	r := result(t, ch)
	require.Equal(t, 0, r.code)
	require.Equal(t, 1, starts)
}
