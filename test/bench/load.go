package main

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Measure is the outcome of one bounded load run against one system.
type Measure struct {
	Ops     int64         `json:"ops"`
	Errors  int64         `json:"errors"`
	Elapsed time.Duration `json:"elapsedNs"`
	Rate    float64       `json:"rate"` // successful ops per second
	P50     time.Duration `json:"p50Ns"`
	P99     time.Duration `json:"p99Ns"`
	FirstEr string        `json:"firstError,omitempty"`
	// CPU cost, when the run was metered: cores the server processes used
	// on average, their CPU time per successful op, and the load
	// generator's (this process's) cores.
	ServerCores   float64 `json:"serverCores,omitempty"`
	ServerUsPerOp float64 `json:"serverCpuUsPerOp,omitempty"`
	ClientCores   float64 `json:"clientCores,omitempty"`
}

// metered runs f while measuring the CPU time of the server processes
// pids and of the harness itself, and records it in the Measure.
func metered(pids []int, f func() Measure) Measure {
	srv, cli := startCPU(pids), startCPU([]int{os.Getpid()})
	profiled := prof.capture(pids, profileDur)
	m := f()
	profiled()
	el := time.Since(srv.t0).Seconds()
	sec := srv.seconds()
	m.ServerCores, m.ClientCores = sec/el, cli.seconds()/el
	if m.Ops > 0 {
		m.ServerUsPerOp = sec * 1e6 / float64(m.Ops)
	}
	return m
}

// opFunc runs one operation for worker w and returns its error.
type opFunc func(ctx context.Context, w int) error

// closedLoop runs c workers, each calling op back to back, until d has
// passed or maxOps operations were started, whichever comes first. Every
// loop is bounded in count and time; it stops by itself. Failed operations
// count as errors, not in the rate; after 1,000 errors the run is cut
// short so a broken target cannot spin.
func closedLoop(c int, d time.Duration, maxOps int64, op opFunc) Measure {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	deadline, _ := ctx.Deadline()
	var started, errs atomic.Int64
	var firstErr atomic.Value
	lats := make([]*latencies, c)
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := 0; w < c; w++ {
		lats[w] = &latencies{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && started.Add(1) <= maxOps {
				s := time.Now()
				if err := op(ctx, w); err != nil {
					if ctx.Err() != nil || !time.Now().Before(deadline) {
						return // cut by the deadline: neither success nor error
					}
					firstErr.CompareAndSwap(nil, err.Error())
					if errs.Add(1) > 1000 {
						cancel()
					}
					continue
				}
				lats[w].add(time.Since(s))
			}
		}()
	}
	wg.Wait()
	return finish(lats, errs.Load(), time.Since(t0), &firstErr)
}

// finish turns per-worker samples into a Measure.
func finish(lats []*latencies, errs int64, el time.Duration, firstErr *atomic.Value) Measure {
	all := merged(lats)
	var seen int
	for _, l := range lats {
		seen += l.seen
	}
	m := Measure{Ops: int64(seen), Errors: errs, Elapsed: el}
	m.Rate = float64(seen) / el.Seconds()
	m.P50, m.P99 = percentile(all, 0.50), percentile(all, 0.99)
	if v, ok := firstErr.Load().(string); ok {
		m.FirstEr = v
	}
	return m
}

// openLoop sends at a fixed rate for d with up to c requests in flight.
// Request i is due at t0 + i/rate. A worker still busy at the due time
// sends at once and its latency is measured from the due time, so queueing
// behind a slow target is counted (no coordinated omission); a worker that
// was idle measures from its actual send, so the harness's own timer slop
// is not charged to the target. Bounded by d and rate·d.
func openLoop(c int, rate float64, d time.Duration, op opFunc) Measure {
	ctx, cancel := context.WithTimeout(context.Background(), d+5*time.Second)
	defer cancel()
	total := int64(rate * d.Seconds())
	interval := time.Duration(float64(time.Second) / rate)
	var next, errs atomic.Int64
	var firstErr atomic.Value
	lats := make([]*latencies, c)
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := 0; w < c; w++ {
		lats[w] = &latencies{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= total {
					return
				}
				due := t0.Add(time.Duration(i) * interval)
				start := due
				if wait := time.Until(due); wait > 0 {
					// Idle at the due time: timer slop is the harness's,
					// not the target's, so time from the actual send.
					time.Sleep(wait)
					start = time.Now()
				}
				if err := op(ctx, w); err != nil {
					firstErr.CompareAndSwap(nil, err.Error())
					if errs.Add(1) > 1000 {
						cancel()
					}
					continue
				}
				lats[w].add(time.Since(start))
			}
		}()
	}
	wg.Wait()
	return finish(lats, errs.Load(), time.Since(t0), &firstErr)
}
