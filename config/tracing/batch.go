package tracing

import (
	"context"
	"errors"
	"os"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// batcher is the span processor of an OTLP setup. It keeps the SDK
// BatchSpanProcessor's contract — the OTEL_BSP_* variables with the same
// defaults, a bounded queue that drops when full, exports of at most
// MaxExportBatchSize spans as soon as a batch is full or after the
// schedule delay, ForceFlush, and a Shutdown that exports what is queued —
// without its per-span hand-over: the SDK's processor sends every ended
// span over a channel to its goroutine, which at one span per proxied
// request woke that goroutine once per request (BENCHMARKS.md, "Traces").
// Here an ended span is appended to a slice under a mutex, and the
// goroutine is woken once per full batch.
type batcher struct {
	exp  sdktrace.SpanExporter
	data dataExporter // exp's own entry for queued spans, when it has one
	opts batchOptions

	mu      sync.Mutex
	queue   []spanData // SDK spans, and a Recorder's when data is set
	stopped bool

	batch    []spanData              // the loop's, handed to the exporter
	sdkBatch []sdktrace.ReadOnlySpan // batch as SDK spans, for an exporter without data
	full     chan struct{}           // a full batch is queued (capacity 1)
	flushes  chan chan struct{}      // ForceFlush's requests
	stop     chan struct{}           // closed by Shutdown
	done     chan struct{}           // closed when the loop has exported the rest
	stopOnce sync.Once
}

// batchOptions are the BatchSpanProcessor's settings.
type batchOptions struct {
	delay, exportTimeout time.Duration
	maxQueue, maxBatch   int
}

// The BatchSpanProcessor's defaults (sdktrace.Default*).
const (
	bspDefaultDelayMS         = 5000
	bspDefaultExportTimeoutMS = 30000
	bspDefaultMaxQueue        = 2048
	bspDefaultMaxBatch        = 512
)

// readBatchOptions reads OTEL_BSP_SCHEDULE_DELAY, OTEL_BSP_EXPORT_TIMEOUT
// (milliseconds), OTEL_BSP_MAX_QUEUE_SIZE and
// OTEL_BSP_MAX_EXPORT_BATCH_SIZE as sdktrace.NewBatchSpanProcessor does: a
// value that is not an integer is the default, and a batch larger than
// the queue is the smaller of the default batch and the queue.
func readBatchOptions() batchOptions {
	o := batchOptions{
		delay:         time.Duration(envInt("OTEL_BSP_SCHEDULE_DELAY", bspDefaultDelayMS)) * time.Millisecond,
		exportTimeout: time.Duration(envInt("OTEL_BSP_EXPORT_TIMEOUT", bspDefaultExportTimeoutMS)) * time.Millisecond,
		maxQueue:      envInt("OTEL_BSP_MAX_QUEUE_SIZE", bspDefaultMaxQueue),
		maxBatch:      envInt("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", bspDefaultMaxBatch),
	}
	if o.maxBatch > o.maxQueue {
		o.maxBatch = min(bspDefaultMaxBatch, o.maxQueue)
	}
	// The SDK's processor exports span by span with a batch size of 0 or
	// less, which is a batch of one.
	o.maxQueue, o.maxBatch = max(o.maxQueue, 1), max(o.maxBatch, 1)
	return o
}

// envInt reads an integer variable, def when unset or not an integer.
func envInt(key string, def int) int {
	v, err := strconv.Atoi(os.Getenv(key))
	if err != nil {
		return def
	}
	return v
}

// dataExporter is an exporter that takes the batcher's queued spans as
// they are: fencepost's OTLP/HTTP exporter, which can therefore export a
// Recorder's Spans too.
type dataExporter interface {
	exportData(ctx context.Context, spans []spanData) error
}

// newBatcher starts the processor's goroutine; Shutdown ends it. data,
// when not nil, is exp's entry for queued spans.
func newBatcher(exp sdktrace.SpanExporter, data dataExporter) *batcher {
	b := &batcher{exp: exp, data: data, opts: readBatchOptions(), full: make(chan struct{}, 1),
		flushes: make(chan chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	b.queue = make([]spanData, 0, b.opts.maxBatch)
	go b.run()
	return b
}

// OnStart does nothing: only ended spans are exported.
func (*batcher) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues a sampled span, or drops it when the queue is full or the
// processor shut down.
func (b *batcher) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	b.enqueue(s)
}

// enqueue queues an ended, sampled span, or drops it when the queue is
// full or the processor shut down; it reports whether s was queued.
func (b *batcher) enqueue(s spanData) bool {
	b.mu.Lock()
	if b.stopped || len(b.queue) >= b.opts.maxQueue {
		b.mu.Unlock()
		return false
	}
	b.queue = append(b.queue, s)
	ready := len(b.queue) == b.opts.maxBatch
	b.mu.Unlock()
	if ready {
		select {
		case b.full <- struct{}{}:
		default: // the loop is already told
		}
	}
	return true
}

// run exports full batches when told, everything queued when the delay
// passes or a flush asks, and the rest at shutdown.
func (b *batcher) run() {
	defer close(b.done)
	t := time.NewTimer(b.opts.delay)
	defer t.Stop()
	for {
		var flushed chan struct{}
		onlyFull := false
		select {
		case <-b.full:
			onlyFull = true
		case <-t.C:
		case flushed = <-b.flushes:
		case <-b.stop:
			b.export(false)
			return
		}
		b.export(onlyFull)
		if flushed != nil {
			close(flushed)
		}
		t.Reset(b.opts.delay)
	}
}

// export sends the queue in batches: only full ones when onlyFull, else
// every span queued when it started.
func (b *batcher) export(onlyFull bool) {
	b.mu.Lock()
	left := len(b.queue)
	b.mu.Unlock()
	for {
		b.mu.Lock()
		n := min(len(b.queue), b.opts.maxBatch)
		if !onlyFull {
			n = min(n, left)
		}
		if n <= 0 || (onlyFull && n < b.opts.maxBatch) {
			b.mu.Unlock()
			return
		}
		b.batch = append(b.batch[:0], b.queue[:n]...)
		rest := copy(b.queue, b.queue[n:])
		clear(b.queue[rest:])
		b.queue = b.queue[:rest]
		b.mu.Unlock()
		left -= n
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if b.opts.exportTimeout > 0 {
			ctx, cancel = context.WithTimeoutCause(ctx, b.opts.exportTimeout, errExportTimeout)
		}
		if err := b.send(ctx); err != nil {
			otel.Handle(err) // as the SDK's processor reports a failed export
		}
		cancel()
		for _, s := range b.batch {
			if l, ok := s.(*Span); ok {
				l.release() // exported: back to its Recorder's pool
			}
		}
		clear(b.batch) // let the spans go
		clear(b.sdkBatch)
	}
}

// send exports the batch: as it is to a dataExporter, else as the SDK
// spans it then holds (a Recorder exists only over a dataExporter).
func (b *batcher) send(ctx context.Context) error {
	if b.data != nil {
		return b.data.exportData(ctx, b.batch)
	}
	b.sdkBatch = b.sdkBatch[:0]
	for _, s := range b.batch {
		b.sdkBatch = append(b.sdkBatch, s.(sdktrace.ReadOnlySpan))
	}
	return b.exp.ExportSpans(ctx, b.sdkBatch)
}

// errExportTimeout is the cause of an export cut by OTEL_BSP_EXPORT_TIMEOUT.
var errExportTimeout = errors.New("processor export timeout")

// ForceFlush exports every span queued before it was called; ctx bounds
// the wait.
func (b *batcher) ForceFlush(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ch := make(chan struct{})
	select {
	case b.flushes <- ch:
	case <-b.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown stops queueing, exports what is queued and shuts the exporter
// down; ctx bounds the wait. A second call only waits.
func (b *batcher) Shutdown(ctx context.Context) error {
	b.stopOnce.Do(func() {
		b.mu.Lock()
		b.stopped = true
		b.mu.Unlock()
		close(b.stop)
	})
	select {
	case <-b.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return b.exp.Shutdown(ctx)
}
