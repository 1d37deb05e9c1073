package worker_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/fencepost/fencepost/proxy/worker"
	"github.com/fencepost/fencepost/proxy/worker/internal/fakectl"
)

// BenchmarkStopToCancel measures, per lease, the time from the fake
// sidecar handing a stop event (revoked) to its attach stream to the
// work's ctx.Done firing; it reports the p50 and p99 (the bound:
// p99 ≤ 50 ms).
//
//	go test -run '^$' -bench 'StopToCancel$' -benchtime 200x ./proxy/worker/
func BenchmarkStopToCancel(b *testing.B) {
	s := fakectl.New()
	url, stop, err := s.Listen()
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	c := worker.NewClient(url)
	lat := make([]time.Duration, 0, b.N)
	for i := 0; b.Loop(); i++ {
		task := fmt.Sprintf("b%d", i)
		held := make(chan struct{})
		fired := make(chan time.Time, 1)
		done := make(chan error, 1)
		go func() {
			done <- c.Run(context.Background(), task, func(ctx context.Context, l *worker.Lease) error {
				close(held)
				<-ctx.Done()
				fired <- time.Now()
				return nil
			}, worker.WithCreate())
		}()
		<-held
		t0, ok := s.Revoke(task)
		if !ok {
			b.Fatal("not held")
		}
		lat = append(lat, (<-fired).Sub(t0))
		<-done
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds())/1000, "p99-ms")
}
