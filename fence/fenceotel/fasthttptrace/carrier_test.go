package fasthttptrace

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// header is a request header that keeps names as sent, as the sidecar's.
func header(kv ...string) *fasthttp.RequestHeader {
	h := &fasthttp.RequestHeader{}
	h.DisableNormalizing()
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// values is every value of name, in any spelling.
func values(h *fasthttp.RequestHeader, name string) []string {
	var out []string
	for k, v := range h.All() {
		if equalFold(k, name) {
			out = append(out, string(k)+": "+string(v))
		}
	}
	return out
}

// InjectSpanContext writes what the W3C propagator writes for the same
// span context, and leaves one traceparent whatever spellings the worker
// sent.
func TestInjectSpanContextWritesWhatThePropagatorWrites(t *testing.T) {
	ts, err := trace.ParseTraceState("vendor=a,other=b")
	require.NoError(t, err)
	for _, sc := range []trace.SpanContext{
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0xab, 1}, SpanID: trace.SpanID{0xcd, 2}, TraceFlags: trace.FlagsSampled}),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{3}, SpanID: trace.SpanID{4}, TraceFlags: 0xff, TraceState: ts}),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{5}, SpanID: trace.SpanID{6}}),
	} {
		want := propagation.MapCarrier{}
		propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), want)

		h := header("Traceparent", "00-old-old-01", "traceparent", "00-older", "X-Other", "kept")
		InjectSpanContext(sc, h)
		require.Equal(t, []string{"traceparent: " + want["traceparent"]}, values(h, "traceparent"))
		if want["tracestate"] != "" {
			require.Equal(t, []string{"tracestate: " + want["tracestate"]}, values(h, "tracestate"))
		}
		require.Equal(t, "kept", string(h.Peek("X-Other")))
	}
}

func TestInjectSpanContextOfNothingWritesNothing(t *testing.T) {
	h := header("traceparent", "00-worker")
	InjectSpanContext(trace.SpanContext{}, h)
	require.Equal(t, []string{"traceparent: 00-worker"}, values(h, "traceparent"))
}

// The request path injects on every traced request: it allocates nothing.
func TestInjectSpanContextAllocatesNothing(t *testing.T) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	h := header("Traceparent", "00-worker", "Host", "x")
	InjectSpanContext(sc, h)
	require.Zero(t, testing.AllocsPerRun(50, func() { InjectSpanContext(sc, h) }))
}
