package request

import (
	"context"
	"encoding/json"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/proxy/leases"
	"github.com/fencepost/fencepost/proxy/proxytest"
)

// testPath is a request path over a running lease keeper, both on a
// manual clock, with the fake cluster behind the keeper: the sidecar's
// two halves that a request meets, without its listeners.
type testPath struct {
	p   *Pipeline
	k   *leases.Keeper
	fc  *proxytest.Cluster
	clk *proxytest.Clock
}

// testSettings are request settings for unit tests (package proxy owns
// the real defaults).
func testSettings(t testing.TB, clk *proxytest.Clock) Settings {
	return Settings{
		WorkerID: "worker-1", ReadsWithoutLease: ReadsAllow,
		MaxRequestBody: 1 << 20, MaxResponseBody: 1 << 20, MaxHeaderBytes: 64 << 10, MaxJournalBody: 1 << 20,
		DialTimeout: 2 * time.Second, UpstreamTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second,
		UpstreamIdleTimeout: time.Second, ClusterTimeout: 2 * time.Second,
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)), Registerer: prometheus.NewRegistry(), Clock: clk,
	}
}

// newTestPath starts a keeper whose leases are valid for validFor and
// builds a request path over it; both stop with the test.
func newTestPath(t testing.TB, validFor time.Duration) *testPath {
	t.Helper()
	clk := proxytest.NewClock()
	fc := proxytest.NewCluster()
	fc.ValidFor = validFor
	s := testSettings(t, clk)
	k, err := leases.New(leases.Settings{
		WorkerID: s.WorkerID, Drift: 0.01, MarginFloor: 200 * time.Millisecond, SessionHeartbeat: 5 * time.Second,
		ClusterTimeout: s.ClusterTimeout, Logger: s.Logger, Registerer: s.Registerer, Clock: clk,
	}, fc)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	k.Run(ctx, func(f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
		}()
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	require.Eventually(t, func() bool { return k.SessionID() != "" }, 5*time.Second, time.Millisecond, "session open")
	p, err := New(s, k)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return &testPath{p: p, k: k, fc: fc, clk: clk}
}

// acquire takes the lease of task.
func (tp *testPath) acquire(t testing.TB, task string) {
	t.Helper()
	_, err := tp.k.Acquire(t.Context(), task, false, api.AcquireRequest{Create: true})
	require.NoError(t, err)
}

// refusingListener accepts nothing it is not asked for: accepted counts
// the connections that reached it.
func refusingListener(t *testing.T) (addr string, accepted func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	n := 0
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			n++
			mu.Unlock()
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return ln.Addr().String(), func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

// problemType returns the type of a problem document.
func problemType(t *testing.T, body []byte) string {
	t.Helper()
	var p api.Problem
	require.NoError(t, json.Unmarshal(body, &p))
	return p.Type
}
