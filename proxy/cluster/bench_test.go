package cluster_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/cluster"
	"github.com/fencepost/fencepost/raftstore/httpapi/httpapitest"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zapcore"
)

// Round trips of client + HTTP API + a real single-node store (raft log
// fsynced on every commit). Run with:
//
//	go test -run '^$' -bench . -benchtime 3s ./proxy/cluster/
//
// The parallel variants keep 32 calls in flight per core, as many
// sidecars would.

func benchClient(b *testing.B) *cluster.Client {
	cl := httpapitest.StartCluster(b, 1, zapcore.ErrorLevel)
	c, err := cluster.New(cluster.Config{Endpoints: cl.Endpoints()})
	require.NoError(b, err)
	b.Cleanup(c.Close)
	return c
}

func reportOps(b *testing.B, start time.Time) {
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
}

// heartbeatSession opens a session holding one lease.
func heartbeatSession(b *testing.B, c *cluster.Client, i int64) string {
	ctx := context.Background()
	sess, err := c.OpenSession(ctx, api.OpenSessionRequest{WorkerID: fmt.Sprintf("w%d", i)})
	require.NoError(b, err)
	_, err = c.Acquire(ctx, fmt.Sprintf("hb-%d", i), api.AcquireRequest{SessionID: sess.SessionID, Create: true})
	require.NoError(b, err)
	return sess.SessionID
}

func BenchmarkHeartbeat(b *testing.B) {
	c := benchClient(b)
	sid := heartbeatSession(b, c, 0)
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if _, err := c.HeartbeatOnce(ctx, sid, api.HeartbeatRequest{}); err != nil {
			b.Fatal(err)
		}
	}
	reportOps(b, start)
}

func BenchmarkHeartbeatParallel(b *testing.B) {
	c := benchClient(b)
	const parallelism = 32
	// One session per goroutine, opened before the clock starts.
	n := parallelism * runtime.GOMAXPROCS(0)
	sids := make(chan string, n)
	for i := range n {
		sids <- heartbeatSession(b, c, int64(i))
	}
	ctx := context.Background()
	b.SetParallelism(parallelism)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		sid := <-sids
		for pb.Next() {
			if _, err := c.HeartbeatOnce(ctx, sid, api.HeartbeatRequest{}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportOps(b, start)
}

// acquireRelease is one task's life: acquire (creating it), then complete.
func acquireRelease(c *cluster.Client, sid string, i int64) error {
	ctx := context.Background()
	id := fmt.Sprintf("ar-%d", i)
	g, err := c.Acquire(ctx, id, api.AcquireRequest{SessionID: sid, Create: true})
	if err != nil {
		return err
	}
	_, err = c.Release(ctx, id, api.ReleaseRequest{SessionID: sid, Epoch: g.Lease.Epoch, Outcome: lease.OutcomeCompleted})
	return err
}

func BenchmarkAcquireRelease(b *testing.B) {
	c := benchClient(b)
	sess, err := c.OpenSession(context.Background(), api.OpenSessionRequest{WorkerID: "w"})
	require.NoError(b, err)
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		if err := acquireRelease(c, sess.SessionID, int64(i)); err != nil {
			b.Fatal(err)
		}
	}
	reportOps(b, start)
}

func BenchmarkAcquireReleaseParallel(b *testing.B) {
	c := benchClient(b)
	sess, err := c.OpenSession(context.Background(), api.OpenSessionRequest{WorkerID: "w"})
	require.NoError(b, err)
	var n atomic.Int64
	b.SetParallelism(32)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := acquireRelease(c, sess.SessionID, n.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportOps(b, start)
}

// BenchmarkHeartbeatViaFollower measures the forward hop: the client knows
// only a follower of a 3-node cluster, which relays every heartbeat.
func BenchmarkHeartbeatViaFollower(b *testing.B) {
	cl := httpapitest.StartCluster(b, 3, zapcore.ErrorLevel)
	c, err := cluster.New(cluster.Config{Endpoints: []string{cl.Nodes[cl.Follower()].HTTP.Addr()}})
	require.NoError(b, err)
	b.Cleanup(c.Close)
	sid := heartbeatSession(b, c, 0)
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if _, err := c.HeartbeatOnce(ctx, sid, api.HeartbeatRequest{}); err != nil {
			b.Fatal(err)
		}
	}
	reportOps(b, start)
}
