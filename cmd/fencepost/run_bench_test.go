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
	c, _ := otherWorker(b, ep)
	var took []time.Duration
	for i := 0; i < b.N; i++ {
		// A fresh session each time: one that never heartbeats is closed
		// as idle after a few TTLs.
		s, err := c.OpenSession(b.Context(), api.OpenSessionRequest{WorkerID: "other"})
		if err != nil {
			b.Fatal(err)
		}
		sid := s.SessionID
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
				var r runResult
				select {
				case r = <-ch:
				case <-time.After(10 * time.Second):
				}
				b.Fatalf("%s not claimable 30 s after its worker's kill; run exit %d:\n%s", task, r.code, r.stderr)
			}
			time.Sleep(time.Millisecond)
		}
		d := time.Since(killed)
		took = append(took, d)
		if d > 500*time.Millisecond {
			tk, _ := c.Task(b.Context(), task, false)
			if tk != nil && len(tk.History()) > 0 {
				h := tk.History()[len(tk.History())-1]
				b.Logf("%s slow: %v; old lease %s (%s) ended %v after the kill", task, d, h.Status, h.Reason, h.StatusAt.Time().Sub(killed))
			}
		}
		<-ch
	}
	slices.Sort(took)
	q := func(p float64) float64 { return float64(took[int(p*float64(len(took)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "max-ms")
}
