package workertie

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The test binary doubles as the worker: with WORKERTIE_HELPER set it runs
// one of the behaviours below instead of the tests.
func TestMain(m *testing.M) {
	if mode := os.Getenv("WORKERTIE_HELPER"); mode != "" {
		os.Exit(helper(mode))
	}
	os.Exit(m.Run())
}

// helper is a worker's behaviour, named by WORKERTIE_HELPER.
func helper(mode string) int {
	out := os.Getenv("WORKERTIE_OUT")
	note := func(s string) {
		if out != "" {
			f, err := os.OpenFile(out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
			if err == nil {
				_, _ = fmt.Fprintln(f, s)
				_ = f.Close()
			}
		}
	}
	switch mode {
	case "exit":
		n, _ := strconv.Atoi(os.Getenv("WORKERTIE_CODE"))
		note("epoch=" + os.Getenv("FENCEPOST_EPOCH") + " checkpoint=" + os.Getenv("FENCEPOST_CHECKPOINT"))
		return n
	case "env":
		for _, k := range []string{"FENCEPOST_CONTROL_URL", "FENCEPOST_TASK", "FENCEPOST_EPOCH", "FENCEPOST_CHECKPOINT",
			"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy", "SSL_CERT_FILE",
			"REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "NODE_USE_ENV_PROXY"} {
			note(k + "=" + os.Getenv(k))
		}
		return 0
	case "fail-once":
		// Exits 1 the first time (no mark file yet), 0 the second.
		mark := os.Getenv("WORKERTIE_MARK")
		note("epoch=" + os.Getenv("FENCEPOST_EPOCH") + " checkpoint=" + os.Getenv("FENCEPOST_CHECKPOINT"))
		if _, err := os.Stat(mark); err != nil {
			_ = os.WriteFile(mark, nil, 0o600)
			return 1
		}
		return 0
	case "wait-term":
		// Runs until SIGTERM, then exits 0.
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		note("ready")
		<-c
		note("got SIGTERM")
		return 0
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM)
		note("ready")
		time.Sleep(time.Minute)
		return 0
	case "sleep":
		note("ready")
		time.Sleep(time.Minute)
		return 0
	}
	return 99
}

// helperArgv runs the test binary as a worker.
func helperArgv(t *testing.T) []string {
	t.Helper()
	return []string{os.Args[0], "-test.run=^$"}
}

// setHelper sets the helper's environment for this test (inherited by the
// child through the sidecar's environment).
func setHelper(t *testing.T, mode string, kv ...string) string {
	out := t.TempDir() + "/out"
	t.Setenv("WORKERTIE_HELPER", mode)
	t.Setenv("WORKERTIE_OUT", out)
	for i := 0; i+1 < len(kv); i += 2 {
		t.Setenv(kv[i], kv[i+1])
	}
	return out
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fakeKeeper is a one-task sidecar in memory: Acquire grants the task
// (a new epoch whenever it is not held), GiveBack and Complete end it.
type fakeKeeper struct {
	mu         sync.Mutex
	task       string
	epoch      uint64
	held       bool
	checkpoint string
	gaveBack   []string // reasons
	completed  int
	lost       chan Event
}

func newFakeKeeper(task string) *fakeKeeper {
	return &fakeKeeper{task: task, lost: make(chan Event, 16)}
}

func (k *fakeKeeper) Held() []Lease {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.held {
		return nil
	}
	return []Lease{{Task: k.task, Epoch: k.epoch}}
}

func (k *fakeKeeper) GiveBack(_ context.Context, l Lease, reason string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.held && l.Epoch == k.epoch {
		k.held = false
		k.gaveBack = append(k.gaveBack, reason)
	}
	return nil
}

func (k *fakeKeeper) Complete(_ context.Context, l Lease) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.held && l.Epoch == k.epoch {
		k.held = false
		k.completed++
	}
	return nil
}

func (k *fakeKeeper) Lost() <-chan Event { return k.lost }

func (k *fakeKeeper) Acquire(context.Context) (Grant, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.held {
		k.held = true
		k.epoch += 10
	}
	return Grant{Lease: Lease{Task: k.task, Epoch: k.epoch}, Checkpoint: k.checkpoint}, nil
}

// lose drops the lease as the cluster would and tells the supervisor.
func (k *fakeKeeper) lose(kind string) {
	k.mu.Lock()
	l := Lease{Task: k.task, Epoch: k.epoch}
	k.held = false
	k.mu.Unlock()
	k.lost <- Event{Lease: l, Kind: kind, Reason: "test", Stop: true}
}

func (k *fakeKeeper) reasons() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.gaveBack...)
}

func (k *fakeKeeper) done() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.completed
}

func readOut(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}
