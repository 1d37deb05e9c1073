package worker_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/fencepost/fencepost/proxy/worker"
)

// BenchmarkStopToCancelFencepostDev measures, against a real `fencepost
// dev`, the time from the sidecar publishing a stop (the event's `at`,
// when the sidecar learned of the revoke from its heartbeat) to the work's
// ctx.Done firing, per lease revoked with `fencepost ctl tasks revoke`.
// Skips while the sidecar has no GET /v1/attach (as the conformance test).
//
//	FENCEPOST_CONFORMANCE_DEV=1 go test -run '^$' -bench StopToCancelFencepostDev -benchtime 50x ./proxy/worker/
func BenchmarkStopToCancelFencepostDev(b *testing.B) {
	d := startDev(b)
	d.requireAttach(b, "the stop-to-cancel benchmark")
	c := worker.NewClient(d.control)
	var lat []time.Duration
	for i := 0; b.Loop(); i++ {
		task := fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), i)
		held := make(chan struct{})
		stopAt := make(chan time.Time, 1)
		fired := make(chan time.Time, 1)
		done := make(chan error, 1)
		go func() {
			done <- c.Run(context.Background(), task, func(ctx context.Context, l *worker.Lease) error {
				close(held)
				<-ctx.Done()
				fired <- time.Now()
				return nil
			}, worker.WithCreate(), worker.WithEvents(func(ev worker.Event) {
				if ev.Stop && ev.Kind != worker.EventState {
					select {
					case stopAt <- ev.At:
					default:
					}
				}
			}))
		}()
		<-held
		if out, err := d.ctlRun("tasks", "revoke", task); err != nil {
			b.Fatalf("ctl tasks revoke: %v: %s", err, out)
		}
		f := <-fired
		lat = append(lat, f.Sub(<-stopAt))
		<-done
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds())/1000, "p99-ms")
}
