package proxytrace

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/config/tracing"
	"github.com/fencepost/fencepost/fence/fenceotel"
	"github.com/fencepost/fencepost/test/otlprecv"
)

// overRecorder is a Tracer as the sidecar builds one over the default
// OTLP setup (whose provider offers a Recorder), exporting to a decoding
// receiver; flush exports what it holds.
func overRecorder(t *testing.T) (tr *Tracer, recv *otlprecv.Receiver, flush func()) {
	recv = otlprecv.Start(t)
	setup, err := tracing.New(tracing.Config{Exporter: tracing.ExporterOTLP, Endpoint: recv.URL(), Sampler: tracing.SamplerAlwaysOn},
		tracing.Options{})
	require.NoError(t, err)
	tr = New(setup.Provider("sidecar"))
	require.NotNil(t, tr.rec, "the default OTLP setup offers a Recorder")
	return tr, recv, func() { require.NoError(t, setup.Shutdown(context.Background())) }
}

// Over a Recorder the request span is what it is over the SDK: the
// worker's trace continued, named upstream, every attribute, and a block
// linked to the lease event; the ids stay readable after End (the span
// itself is reused then).
func TestARequestSpanOverARecorderCarriesTheSameSpan(t *testing.T) {
	tr, recv, flush := overRecorder(t)
	tr.LeaseEvent("revoked", "t2", 8, "operator")

	r := tr.Start(request("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"), EntryIntercepted)
	r.Target(true, []byte("api.example.com:443/v1/tasks/t1/writes?x=1"), "api.example.com:443")
	r.Lease("t1", 7)
	r.IdempotencyKey("fp1-abc")
	r.Decision(fenceotel.DecisionForwarded)
	var up fasthttp.RequestHeader
	up.DisableNormalizing()
	up.Set("Traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	r.Inject(&up)
	r.End(201)
	traceID := r.TraceID(&up)
	fields := r.LogFields(zap.String("a", "b"))
	r.Decision("late") // after End: ignored, the span is no longer this request's

	b := tr.Start(request(""), EntryProxy)
	b.Lease("t2", 0)
	b.Blocked("revoked", 8)
	b.End(409)
	flush()

	fwd := recv.WaitFor("the forwarded request", func(s otlprecv.Span) bool { return s.Attrs["fencepost.task.id"] == "t1" })
	require.Equal(t, "POST", fwd.Name)
	require.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, fwd.Kind)
	require.Equal(t, "0af7651916cd43dd8448eb211c80319c", fwd.TraceID)
	require.Equal(t, "b7ad6b7169203331", fwd.ParentID)
	require.Equal(t, fwd.TraceID, traceID)
	require.Equal(t, "00-"+fwd.TraceID+"-"+fwd.SpanID+"-01", string(up.Peek("traceparent")))
	require.Empty(t, up.PeekAll("Traceparent"), "the worker's spelling is replaced, not kept beside")
	require.Equal(t, "vendor=1", string(up.Peek("tracestate")))
	require.Contains(t, fields, zap.String(fenceotel.LogSpanID, fwd.SpanID))
	require.Equal(t, map[string]string{
		"http.request.method": "POST", "fencepost.proxy.entry": "intercepted",
		"url.full": "https://api.example.com:443/v1/tasks/t1/writes?x=1", "server.address": "api.example.com", "server.port": "443",
		"fencepost.task.id": "t1", "fencepost.lease.epoch": "7", "fencepost.idempotency_key": "fp1-abc",
		"fencepost.decision": "forwarded", "http.response.status_code": "201",
	}, fwd.Attrs)
	require.Equal(t, tracepb.Status_STATUS_CODE_UNSET, fwd.Status)

	ev := recv.WaitFor("the lease event", otlprecv.Named("lease revoked"))
	blk := recv.WaitFor("the blocked request", func(s otlprecv.Span) bool {
		return s.Attrs["fencepost.task.id"] == "t2" && s.Kind == tracepb.Span_SPAN_KIND_CLIENT
	})
	require.Equal(t, "blocked", blk.Attrs["fencepost.decision"])
	require.Equal(t, "revoked", blk.Attrs["fencepost.block.reason"])
	require.Equal(t, "8", blk.Attrs["fencepost.lease.epoch"])
	require.Equal(t, tracepb.Status_STATUS_CODE_ERROR, blk.Status)
	require.Equal(t, "blocked: revoked", blk.StatusMessage, "the answer's 409 keeps the block's description")
	require.Equal(t, []string{ev.SpanID}, blk.Links)
	require.Empty(t, blk.ParentID, "no worker trace: the sidecar starts one")
	require.Len(t, recv.Spans(), 3, otlprecv.Summary(recv.Spans()))
}
