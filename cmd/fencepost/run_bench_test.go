package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/raftstore/httpapi/httpapitest"
)

// BenchmarkWorkerExitToClaimable measures I8's first bound: from the
// SIGKILL of a `fencepost run` child (its sidecar lives on) until another
// worker's acquire of its task succeeds, polled every millisecond. It
// reports the p50 and p99 over b.N kills (each with its own task and
// sidecar) against a one-node cluster on loopback:
//
//	go test -run '^$' -bench WorkerExitToClaimable -benchtime 200x ./cmd/fencepost/
func BenchmarkWorkerExitToClaimable(b *testing.B) {
	ep := httpapitest.StartCluster(b, 1, zap.ErrorLevel).Endpoints()[0]
	c, sid := otherWorker(b, ep)
	var took []time.Duration
	for i := 0; i < b.N; i++ {
		task := fmt.Sprintf("bench-%d", i)
		pidFile := filepath.Join(b.TempDir(), "pid")
		ch, _ := startRun(b, ep, "--task", task, "--", "/bin/sh", "-c", "echo $$ > "+pidFile+"; exec sleep 60")
		pid := readPid(b, pidFile)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			b.Fatal(err)
		}
		killed := time.Now()
		for {
			if _, err := c.Acquire(b.Context(), task, api.AcquireRequest{SessionID: sid}); err == nil {
				break
			}
			if time.Since(killed) > 30*time.Second {
				b.Fatalf("%s not claimable 30 s after its worker's kill", task)
			}
			time.Sleep(time.Millisecond)
		}
		took = append(took, time.Since(killed))
		<-ch
	}
	slices.Sort(took)
	q := func(p float64) float64 { return float64(took[int(p*float64(len(took)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "max-ms")
}
