package tracing

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// batches is an exporter that keeps the names of each batch it is given;
// while hold is set, exports wait for it to be cleared.
type batches struct {
	mu   sync.Mutex
	got  [][]string
	hold chan struct{}
}

func (e *batches) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	hold := e.hold
	names := make([]string, 0, len(spans))
	for _, s := range spans {
		names = append(names, s.Name())
	}
	e.got = append(e.got, names)
	e.mu.Unlock()
	if hold != nil {
		<-hold
	}
	return nil
}

func (*batches) Shutdown(context.Context) error { return nil }

func (e *batches) batches() [][]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([][]string(nil), e.got...)
}

// ended is a finished sampled span named name.
func ended(name string) sdktrace.ReadOnlySpan {
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled})
	return tracetest.SpanStub{Name: name, SpanContext: sc}.Snapshot()
}

func TestBatcherReadsTheBSPVariablesAsTheSDKDoes(t *testing.T) {
	o := readBatchOptions()
	require.Equal(t, batchOptions{delay: 5 * time.Second, exportTimeout: 30 * time.Second, maxQueue: 2048, maxBatch: 512}, o)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "250")
	t.Setenv("OTEL_BSP_EXPORT_TIMEOUT", "soon") // not an integer: the default
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "100")
	t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "700") // more than the queue: min(512, queue)
	require.Equal(t, batchOptions{delay: 250 * time.Millisecond, exportTimeout: 30 * time.Second, maxQueue: 100, maxBatch: 100},
		readBatchOptions())
}

func TestBatcherExportsEachFullBatchAtOnceAndTheRestOnFlush(t *testing.T) {
	t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "3")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "3600000") // no timed export during the test
	exp := &batches{}
	b := newBatcher(exp, nil)
	defer func() { require.NoError(t, b.Shutdown(context.Background())) }()
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		b.OnEnd(ended(n))
	}
	unsampled := tracetest.SpanStub{Name: "unsampled"}.Snapshot()
	b.OnEnd(unsampled)
	require.Eventually(t, func() bool { return len(exp.batches()) == 2 }, 10*time.Second, time.Millisecond)
	require.Equal(t, [][]string{{"a", "b", "c"}, {"d", "e", "f"}}, exp.batches(), "full batches go without waiting for the delay")
	require.NoError(t, b.ForceFlush(context.Background()))
	require.Equal(t, [][]string{{"a", "b", "c"}, {"d", "e", "f"}, {"g"}}, exp.batches(), "an unsampled span is never exported")
}

func TestBatcherExportsOnTheScheduleDelay(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
	exp := &batches{}
	b := newBatcher(exp, nil)
	defer func() { require.NoError(t, b.Shutdown(context.Background())) }()
	b.OnEnd(ended("lonely"))
	require.Eventually(t, func() bool { return len(exp.batches()) == 1 }, 10*time.Second, time.Millisecond)
	require.Equal(t, []string{"lonely"}, exp.batches()[0])
}

func TestBatcherDropsPastTheQueueAndShutdownExportsTheRest(t *testing.T) {
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "4")
	t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "3600000")
	hold := make(chan struct{})
	exp := &batches{hold: hold}
	b := newBatcher(exp, nil)
	b.OnEnd(ended("1"))
	b.OnEnd(ended("2")) // a full batch: its export blocks on hold
	require.Eventually(t, func() bool { return len(exp.batches()) == 1 }, 10*time.Second, time.Millisecond)
	for _, n := range []string{"3", "4", "5", "6", "7"} {
		b.OnEnd(ended(n)) // "7" finds the queue full
	}
	exp.mu.Lock()
	exp.hold = nil
	exp.mu.Unlock()
	close(hold)
	require.NoError(t, b.Shutdown(context.Background()))
	var all []string
	for _, batch := range exp.batches() {
		require.LessOrEqual(t, len(batch), 2)
		all = append(all, batch...)
	}
	require.Equal(t, []string{"1", "2", "3", "4", "5", "6"}, all)
	b.OnEnd(ended("late"))
	require.NoError(t, b.ForceFlush(context.Background()), "a flush after shutdown does nothing")
	require.Len(t, exp.batches(), 3)
}

func TestBatcherShutdownIsBoundedByItsContext(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	exp := &batches{hold: hold}
	b := newBatcher(exp, nil)
	b.OnEnd(ended("stuck"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, b.Shutdown(ctx), context.Canceled)
}
