package proxytrace

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
)

func request(traceparent string) *fasthttp.RequestCtx {
	var rc fasthttp.RequestCtx
	rc.Request.Header.DisableNormalizing() // as the sidecar serves
	rc.Request.Header.SetMethod("POST")
	rc.Request.SetRequestURI("/v1/tasks/t1/writes?x=1")
	if traceparent != "" {
		rc.Request.Header.Set("Traceparent", traceparent)
		rc.Request.Header.Set("tracestate", "vendor=1")
	}
	return &rc
}

func attrs(s tracetest.SpanStub) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes {
		out[string(kv.Key)] = kv.Value.String()
	}
	return out
}

func TestOffCostsNoAllocation(t *testing.T) {
	var tr *Tracer = New(nil)
	require.Nil(t, tr)
	rc := request("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	var up fasthttp.RequestHeader
	failure := errors.New("x")
	allocs := testing.AllocsPerRun(100, func() {
		r := tr.Start(rc, EntryProxy)
		r.Target(false, []byte("fenced.localhost:7490/w"), "fenced.localhost:7490")
		r.Lease("t1", 5)
		r.IdempotencyKey("k")
		r.Inject(&up)
		r.Decision("forwarded")
		r.Blocked("revoked", 5)
		r.Failed(failure)
		_ = r.LogFields()
		r.End(201)
		tr.LeaseEvent("lost", "t1", 5, "expired")
	})
	require.Zero(t, allocs)
	require.Empty(t, up.Peek("traceparent"))
}

func TestARequestSpanContinuesTheWorkersTraceAndNamesItselfUpstream(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tr := New(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	rc := request("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	r := tr.Start(rc, EntryIntercepted)
	r.Target(true, []byte("api.example.com:443/v1/tasks/t1/writes?x=1"), "api.example.com:443")
	r.Lease("t1", 7)
	r.IdempotencyKey("fp1-abc")
	r.Decision("forwarded")
	var up fasthttp.RequestHeader
	up.DisableNormalizing()
	// The worker's, copied as a Go client spells it.
	up.Set("Traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	r.Inject(&up)
	require.Len(t, up.PeekAll("Traceparent"), 0, "the worker's spelling is replaced, not kept beside")
	require.Len(t, r.LogFields(zap.String("a", "b")), 3)
	r.End(201)

	spans := exp.GetSpans()
	require.Len(t, spans, 1)
	s := spans[0]
	require.Equal(t, "POST", s.Name)
	require.Equal(t, trace.SpanKindClient, s.SpanKind)
	require.Equal(t, "0af7651916cd43dd8448eb211c80319c", s.SpanContext.TraceID().String())
	require.Equal(t, "b7ad6b7169203331", s.Parent.SpanID().String())
	require.Equal(t, "00-0af7651916cd43dd8448eb211c80319c-"+s.SpanContext.SpanID().String()+"-01", string(up.Peek("traceparent")),
		"the upstream's parent is the sidecar's span")
	require.Equal(t, "vendor=1", string(up.Peek("tracestate")))
	a := attrs(s)
	require.Equal(t, "https://api.example.com:443/v1/tasks/t1/writes?x=1", a["url.full"])
	require.Equal(t, "api.example.com", a["server.address"])
	require.Equal(t, "443", a["server.port"])
	require.Equal(t, "intercepted", a["fencepost.proxy.entry"])
	require.Equal(t, "7", a["fencepost.lease.epoch"])
	require.Equal(t, "t1", a["fencepost.task.id"])
	require.Equal(t, "forwarded", a["fencepost.decision"])
	require.Equal(t, "fp1-abc", a["fencepost.idempotency_key"])
	require.Equal(t, "201", a["http.response.status_code"])
	require.Equal(t, codes.Unset, s.Status.Code)
}

func TestABlockedRequestIsAnErrorLinkedToTheLeaseEvent(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tr := New(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	tr.LeaseEvent("revoked", "t1", 7, "operator")
	r := tr.Start(request(""), EntryProxy)
	r.Lease("t1", 0)
	r.Blocked("revoked", 7)
	r.End(409)
	spans := exp.GetSpans()
	require.Len(t, spans, 2)
	ev, req := spans[0], spans[1]
	require.Equal(t, "lease revoked", ev.Name)
	require.Equal(t, "7", attrs(ev)["fencepost.lease.epoch"])
	require.Equal(t, "operator", attrs(ev)["fencepost.lease.reason"])
	require.False(t, req.Parent.IsValid(), "no worker trace: the sidecar starts one")
	require.Equal(t, codes.Error, req.Status.Code)
	require.Equal(t, "blocked", attrs(req)["fencepost.decision"])
	require.Equal(t, "revoked", attrs(req)["fencepost.block.reason"])
	require.Len(t, req.Links, 1)
	require.Equal(t, ev.SpanContext.SpanID(), req.Links[0].SpanContext.SpanID())

	// Once released, the task is forgotten: no link, no growth.
	tr.LeaseEvent("released", "t1", 7, "completed")
	r = tr.Start(request(""), EntryProxy)
	r.Lease("t1", 0)
	r.Blocked("no_lease", 0)
	r.End(409)
	require.Empty(t, exp.GetSpans()[3].Links)
}
