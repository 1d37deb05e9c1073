package raftstore

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/fence/pki/pkitest"
)

// Benchmarks run against in-process clusters on loopback TCP with fsync
// on, calling the Store directly on the leader (no HTTP). They report
// ops/s over the wall clock: with b.RunParallel many goroutines share one
// leader, which is where proposal batching and VerifyLeader batching pay.
//
//	go test -run '^$' -bench . -benchtime 2000x ./raftstore/

func benchCluster(b *testing.B, n int, mod ...func(*Config)) *Store {
	b.Helper()
	stores := make([]*Store, n)
	for i := range n {
		cfg := testConfig(b, fmt.Sprintf("b%d", i))
		cfg.Bootstrap = i == 0
		cfg.Logger = nil
		for _, m := range mod {
			m(&cfg)
		}
		s, err := Open(cfg)
		if err != nil {
			b.Fatal(err)
		}
		stores[i] = s
		b.Cleanup(func() { _ = s.Close() })
		if i > 0 {
			join := api.JoinRequest{ID: cfg.NodeID, RaftAddr: s.RaftAddr(), HTTPAddr: cfg.HTTPAddr}
			waitFor(b, waitTimeout, "join", func() bool { return stores[0].Join(context.Background(), join) == nil })
		}
	}
	leader := stores[0]
	waitFor(b, waitTimeout, "leader in office", func() bool { return inOffice(leader) })
	return leader
}

func reportOps(b *testing.B, start time.Time) {
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
}

// benchVariant is a cluster shape a benchmark runs on.
type benchVariant struct {
	name string
	n    int
	mods []func(*Config)
}

// benchVariants are 1 and 3 plaintext nodes, and 3 nodes with mutual TLS
// on raft ("nodes=3,tls"): the cost of TLS and of the per-RPC sender check
// on the replication path, side by side.
func benchVariants(b *testing.B) []benchVariant {
	return []benchVariant{
		{name: "nodes=1", n: 1}, {name: "nodes=3", n: 3},
		{name: "nodes=3,tls", n: 3, mods: []func(*Config){withTLS(pkitest.New(b, "bench"))}},
	}
}

// BenchmarkAcquireRelease grants and gives back tasks from 16 goroutines.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, v := range benchVariants(b) {
		b.Run(v.name, func(b *testing.B) {
			s := benchCluster(b, v.n, v.mods...)
			var seq atomic.Uint64
			b.SetParallelism(16)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				id := seq.Add(1)
				sess, err := s.OpenSession(context.Background(), fmt.Sprintf("bs%d", id), api.OpenSessionRequest{WorkerID: fmt.Sprintf("bw%d", id)})
				if err != nil {
					b.Error(err)
					return
				}
				task := fmt.Sprintf("bt%d", id)
				for pb.Next() {
					k := seq.Add(1)
					g, err := s.Acquire(context.Background(), fmt.Sprintf("ba%d", k), task, api.AcquireRequest{SessionID: sess.SessionID, Create: true})
					if err != nil {
						b.Error(err)
						return
					}
					if _, err := s.Release(context.Background(), fmt.Sprintf("br%d", k), task, api.ReleaseRequest{SessionID: sess.SessionID, Epoch: g.Lease.Epoch, Outcome: lease.OutcomeGivenBack}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			reportOps(b, start)
		})
	}
}

// BenchmarkHeartbeat renews sessions from 64 goroutines.
func BenchmarkHeartbeat(b *testing.B) {
	for _, v := range benchVariants(b) {
		b.Run(v.name, func(b *testing.B) {
			s := benchCluster(b, v.n, v.mods...)
			var seq atomic.Uint64
			b.SetParallelism(64)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				id := seq.Add(1)
				sess, err := s.OpenSession(context.Background(), fmt.Sprintf("hs%d", id), api.OpenSessionRequest{WorkerID: fmt.Sprintf("hw%d", id)})
				if err != nil {
					b.Error(err)
					return
				}
				task := fmt.Sprintf("ht%d", id)
				if _, err := s.Acquire(context.Background(), fmt.Sprintf("ha%d", id), task, api.AcquireRequest{SessionID: sess.SessionID, Create: true}); err != nil {
					b.Error(err)
					return
				}
				for pb.Next() {
					if _, err := s.Heartbeat(context.Background(), sess.SessionID, api.HeartbeatRequest{}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			reportOps(b, start)
			b.ReportMetric(float64(s.verify.roundCount()), "verify-rounds")
		})
	}
}

// BenchmarkFailover measures, with the shipped raft defaults (heartbeat
// 100ms, election 300ms, leader lease 100ms), the time from killing the
// leader of a 3-node cluster to the first acquire that succeeds on the new
// one. Run it with a few iterations:
//
//	go test -run '^$' -bench Failover -benchtime 7x ./raftstore/
func BenchmarkFailover(b *testing.B) {
	b.Run("plaintext", func(b *testing.B) { benchFailover(b) })
	b.Run("tls", func(b *testing.B) { benchFailover(b, withTLS(pkitest.New(b, "bench"))) })
}

func benchFailover(b *testing.B, mods ...func(*Config)) {
	c := newTestCluster(b, 3, append(mods, func(cfg *Config) {
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 0, 0, 0
		cfg.Logger = nil
	})...)
	sid := c.openSession("fw")
	var took []time.Duration
	b.ResetTimer()
	for i := range b.N {
		old := c.waitForLeader()
		oi := c.index(old)
		start := time.Now()
		c.stop(oi)
		_, err := retryLeader(c, func(s *Store) (api.Grant, error) {
			return s.Acquire(context.Background(), fmt.Sprintf("fa%d", i), fmt.Sprintf("ft%d", i), api.AcquireRequest{SessionID: sid, Create: true})
		})
		if err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
		b.StopTimer()
		c.start(oi)
		c.waitConverged()
		b.StartTimer()
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "median-ms")
	b.ReportMetric(float64(took[len(took)-1].Milliseconds()), "max-ms")
}
