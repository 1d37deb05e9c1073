package refsvc

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencepost/fencepost/fence/fenceotel"
)

// tracedWrite sends a write under a client span and returns its span
// context.
func tracedWrite(t *testing.T, fx *fixture, tp trace.TracerProvider, task, epoch, key string) (trace.SpanContext, int) {
	t.Helper()
	ctx, span := tp.Tracer("worker").Start(context.Background(), "tool call", trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	h := http.Header{}
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
	resp, _ := fx.write(t, task, epoch, key, "b", "traceparent", h.Get("traceparent"))
	return span.SpanContext(), resp.StatusCode
}

// attrsOf flattens a span's attributes.
func attrsOf(s sdktrace.ReadOnlySpan) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes() {
		out[string(kv.Key)] = kv.Value.String()
	}
	return out
}

func TestEveryWriteIsAServerSpanCarryingTheFenceVerdict(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	fx := start(t, Config{TracerProvider: tp})

	parent, status := tracedWrite(t, fx, tp, "t1", "5", "k1")
	require.Equal(t, http.StatusCreated, status)
	_, status = tracedWrite(t, fx, tp, "t1", "5", "k1")
	require.Equal(t, http.StatusCreated, status, "a replay answers like the first")
	_, status = tracedWrite(t, fx, tp, "t1", "4", "")
	require.Equal(t, http.StatusConflict, status)

	var server []sdktrace.ReadOnlySpan
	for _, s := range exp.GetSpans().Snapshots() {
		if s.SpanKind() == trace.SpanKindServer {
			server = append(server, s)
		}
	}
	require.Len(t, server, 3)
	first := server[0]
	require.Equal(t, "POST /v1/tasks/{task}/writes", first.Name())
	require.Equal(t, parent.TraceID(), first.SpanContext().TraceID(), "the worker's trace continues")
	require.Equal(t, parent.SpanID(), first.Parent().SpanID())
	a := attrsOf(first)
	require.Equal(t, fenceotel.VerdictAccepted, a[string(fenceotel.Verdict)])
	require.Equal(t, "5", a[string(fenceotel.Epoch)])
	require.Equal(t, "t1", a[string(fenceotel.TaskID)])
	require.Equal(t, "k1", a[string(fenceotel.IdempotencyKey)])
	require.Equal(t, "201", a["http.response.status_code"])
	require.Equal(t, "POST", a["http.request.method"])

	require.Equal(t, fenceotel.VerdictReplayed, attrsOf(server[1])[string(fenceotel.Verdict)])
	stale := attrsOf(server[2])
	require.Equal(t, "stale-token", stale[string(fenceotel.Verdict)])
	require.Equal(t, "5", stale[string(fenceotel.MaxSeenEpoch)])
	require.Equal(t, "4", stale[string(fenceotel.Epoch)])
	require.Equal(t, codes.Unset, server[2].Status().Code, "a 409 is the caller's fault, not the server's")
}
