package proxy

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/zap"
)

// discard is a span processor that drops every ended span.
type discard struct{}

func (discard) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (discard) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (discard) Shutdown(context.Context) error                  { return nil }
func (discard) ForceFlush(context.Context) error                { return nil }

// BenchmarkRawProxyGETSpanOnly is BenchmarkRawProxyGETTraced without the
// export: every request's span is sampled, recorded and ended by the SDK,
// then dropped. Beside BenchmarkRawProxyGET and ...Traced in one run it
// splits tracing's cost into the span's life in the SDK and the rest
// (batching, encoding, posting) — BENCHMARKS.md, "Traces".
func BenchmarkRawProxyGETSpanOnly(b *testing.B) {
	up := startBenchUpstream(b)
	cfg := baseConfig(b)
	cfg.Logger = zap.NewNop()
	cfg.Registerer = prometheus.NewRegistry()
	cfg.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithSpanProcessor(discard{}))
	s := startSidecar(b, newFakeCluster(), cfg)
	mustAcquire(b, s, "bench")
	runRaw(b, s.ProxyAddr(), rawRequest("GET", "http://"+up+"/bench", up, nil))
}
