package httpapi_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/fenceotel"
	"github.com/fencepost/fencepost/raftstore/httpapi"
	"github.com/fencepost/fencepost/raftstore/httpapi/httpapitest"
	"github.com/fencepost/fencepost/raftstore/node"
)

// traceparent starts a client span and returns it with its header value.
func traceparent(tp trace.TracerProvider, name string) (trace.Span, string) {
	ctx, span := tp.Tracer("client").Start(context.Background(), name, trace.WithSpanKind(trace.SpanKindClient))
	h := http.Header{}
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
	return span, h.Get("traceparent")
}

// serverSpans returns the ended server spans named name.
func serverSpans(exp *tracetest.InMemoryExporter, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.SpanKind == trace.SpanKindServer && s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// attr returns a span's attribute as text.
func attr(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// A request to a follower is a server span continuing the caller's trace;
// the follower's relay makes the leader's span its child, and the leader's
// carries the task, the epoch, the caller's role and the raft apply time.
func TestAPIRequestsAreServerSpansAcrossTheRelay(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	cl := httpapitest.StartClusterWith(t, 3, zapcore.WarnLevel, func(cfg *node.Config) { cfg.HTTP.TracerProvider = tp })
	cl.WaitLeader()
	base := "http://" + cl.Nodes[cl.Follower()].HTTP.Addr()

	r := do(t, "POST", base+api.PathSessions, []byte(`{"workerId":"w"}`))
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	var sess api.Session
	r.decode(t, &sess)

	client, tparent := traceparent(tp, "acquire")
	r = do(t, "POST", base+path(api.PathAcquire, "{id}", "t1"),
		mustJSON(t, api.AcquireRequest{SessionID: sess.SessionID, Create: true}), "traceparent", tparent)
	client.End()
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var g api.Grant
	r.decode(t, &g)

	spans := serverSpans(exp, "POST "+api.PathAcquire)
	require.Len(t, spans, 2, "the follower's and the leader's")
	var follower, leader tracetest.SpanStub
	for _, s := range spans {
		if s.Parent.SpanID() == client.SpanContext().SpanID() {
			follower = s
		} else {
			leader = s
		}
	}
	require.True(t, follower.SpanContext.IsValid(), "no span continues the client's")
	require.Equal(t, client.SpanContext().TraceID(), leader.SpanContext.TraceID())
	require.Equal(t, follower.SpanContext.SpanID(), leader.Parent.SpanID(), "the relay carries the follower's span")
	require.Equal(t, "t1", attr(leader, string(fenceotel.TaskID)))
	require.Equal(t, strconv.FormatUint(g.Lease.Epoch, 10), attr(leader, string(fenceotel.Epoch)))
	require.Equal(t, "w", attr(leader, string(fenceotel.Worker)))
	require.Equal(t, "dev", attr(leader, string(fenceotel.CallerRole)), "plain HTTP: every caller is the dev identity")
	require.NotEmpty(t, attr(leader, string(fenceotel.RaftApply)))
	require.Equal(t, "200", attr(leader, "http.response.status_code"))
	require.Empty(t, attr(follower, string(fenceotel.RaftApply)), "the follower applied nothing")

	// Revoke names the epoch it took away.
	r = do(t, "POST", base+path(api.PathRevoke, "{id}", "t1"), mustJSON(t, api.RevokeRequest{Epoch: g.Lease.Epoch}))
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	for _, s := range serverSpans(exp, "POST "+api.PathRevoke) {
		require.Equal(t, strconv.FormatUint(g.Lease.Epoch, 10), attr(s, string(fenceotel.Epoch)))
	}

	// Probes and /metrics make no spans.
	before := len(exp.GetSpans())
	require.Equal(t, http.StatusOK, do(t, "GET", base+api.PathHealth, nil).status)
	require.Len(t, exp.GetSpans(), before)
}

// Log lines written for a traced request carry its trace and span id.
func TestLogLinesOfATracedRequestCarryItsIDs(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	core, logs := observer.New(zapcore.InfoLevel)
	store := httpapitest.New()
	srv := startServer(t, store, func(c *httpapi.Config) { c.TracerProvider, c.Logger = tp, zap.New(core) })
	base := "http://" + srv.Addr()

	client, tparent := traceparent(tp, "revoke")
	r := do(t, "POST", base+path(api.PathRevoke, "{id}", "nope"), mustJSON(t, api.RevokeRequest{}), "traceparent", tparent)
	client.End()
	require.NotEqual(t, http.StatusOK, r.status)
	span := serverSpans(exp, "POST "+api.PathRevoke)
	require.Len(t, span, 1)
	audits := logs.FilterMessage("audit").All()
	require.Len(t, audits, 1)
	fields := audits[0].ContextMap()
	require.Equal(t, span[0].SpanContext.TraceID().String(), fields[fenceotel.LogTraceID])
	require.Equal(t, span[0].SpanContext.SpanID().String(), fields[fenceotel.LogSpanID])
}

// Without a provider the server makes no span and logs no ids.
func TestTracingOffLogsNoIDs(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	srv := startServer(t, httpapitest.New(), func(c *httpapi.Config) { c.Logger = zap.New(core) })
	tp := sdktrace.NewTracerProvider()
	client, tparent := traceparent(tp, "revoke")
	do(t, "POST", "http://"+srv.Addr()+path(api.PathRevoke, "{id}", "nope"), mustJSON(t, api.RevokeRequest{}), "traceparent", tparent)
	client.End()
	audits := logs.FilterMessage("audit").All()
	require.Len(t, audits, 1)
	require.NotContains(t, audits[0].ContextMap(), fenceotel.LogTraceID)
}
