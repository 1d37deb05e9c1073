package fault

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/fencepost/fencepost/proxy"
	"github.com/fencepost/fencepost/proxy/cluster"
	"github.com/fencepost/fencepost/test/netfault"
	"github.com/fencepost/fencepost/test/scenario"
)

func TestMain(m *testing.M) {
	code := m.Run()
	netfault.RemoveBinary()
	if code == 0 {
		if err := goleak.Find(netfault.LeakOptions()...); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// env is one test's world: a cluster, a fenced downstream, and a timeline
// that is printed when the test fails.
type env struct {
	t       *testing.T
	ctx     context.Context
	tl      *scenario.Timeline
	cluster *scenario.Cluster
	down    *scenario.FencedService
	ccfg    scenario.ClusterConfig
}

// newEnv starts a 3-node cluster with cfg (Dir is filled in) and a fenced
// downstream; limit bounds the whole test.
func newEnv(t *testing.T, cfg scenario.ClusterConfig, limit time.Duration) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	t.Cleanup(cancel)
	tl := scenario.NewTimeline(nil)
	t.Cleanup(func() {
		if t.Failed() || testing.Verbose() {
			t.Logf("timeline:\n%s", tl.String())
		}
	})
	cfg.Dir = t.TempDir()
	c, err := scenario.StartCluster(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	down, err := scenario.StartFencedService()
	require.NoError(t, err)
	t.Cleanup(func() { _ = down.Close() })
	l, _ := c.WaitLeader(ctx)
	tl.Logf("cluster", "3 nodes up, leader %s", l.ID)
	return &env{t: t, ctx: ctx, tl: tl, cluster: c, down: down, ccfg: cfg}
}

func (e *env) logf(actor, format string, args ...any) { e.tl.Logf(actor, format, args...) }

// client returns a cluster client of every node. With retry it retries a
// call whose outcome is unknown (with the same request id) until the
// test's context ends, so outcomes become known; without, it tries each
// member once with a short timeout, for probes that must not wait.
func (e *env) client(retry bool) *cluster.Client {
	e.t.Helper()
	cfg := cluster.Config{Endpoints: e.cluster.Endpoints(), Timeout: time.Second}
	if !retry {
		cfg.Retries = len(cfg.Endpoints) - 1
		cfg.Timeout = 500 * time.Millisecond
		cfg.Backoff = 10 * time.Millisecond
	}
	c, err := cluster.New(cfg)
	require.NoError(e.t, err)
	e.t.Cleanup(c.Close)
	return c
}

// sidecar starts an in-process sidecar for worker that reaches the
// cluster at endpoints, and a worker behind it.
func (e *env) sidecar(worker string, endpoints []string) (*proxy.Sidecar, *scenario.Worker) {
	e.t.Helper()
	cc, err := cluster.New(cluster.Config{Endpoints: endpoints, Timeout: time.Second})
	require.NoError(e.t, err)
	s, err := proxy.New(proxy.Config{
		Endpoints: endpoints, WorkerID: worker, ProxyAddr: "127.0.0.1:0", ControlAddr: "127.0.0.1:0",
		ClusterTimeout: time.Second, SessionHeartbeat: 500 * time.Millisecond, UpstreamTimeout: 20 * time.Second,
	}, cc)
	require.NoError(e.t, err)
	require.NoError(e.t, s.Start(e.ctx))
	w := scenario.NewWorker(worker, s.ProxyAddr(), s.ControlAddr())
	e.t.Cleanup(func() {
		w.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		cc.Close()
	})
	return s, w
}

// eventually polls cond every interval until it holds or limit passes.
func eventually(t *testing.T, limit, interval time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(interval)
	}
	return time.Since(start)
}
