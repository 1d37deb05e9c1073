package httpapi

import (
	"context"
	"strconv"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/fenceotel"
	"github.com/fencepost/fencepost/fence/fenceotel/fasthttptrace"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
)

// Tracing of the cluster API. With Config.TracerProvider set, every /v1
// request (not the probes and /metrics, which would drown the traces) is a
// server span named "METHOD route" that continues the caller's
// traceparent, with the caller's role (never its certificate), the request
// id, and for the lease routes the task, epoch and worker; the store adds
// the raft apply time (raftstore.Store.applyEntry). A follower's relay to
// the leader carries the follower's span, so the leader's span is its
// child. Log lines written for the request carry trace_id and span_id.

// tracerName is the instrumentation scope of the API's spans.
const tracerName = "github.com/fencepost/fencepost/raftstore/httpapi"

// startSpan opens the request's server span, backdated to when the request
// reached serve.
func (s *Server) startSpan(rc *fasthttp.RequestCtx, route, rid string, start time.Time) (context.Context, trace.Span) {
	return fasthttptrace.StartServer(context.Background(), s.tracer, rc, route, trace.WithTimestamp(start),
		trace.WithAttributes(attribute.String("fencepost.request_id", rid)))
}

// role names the caller's role for the span: dev, anonymous or the role
// in its certificate.
func (p principal) role() string {
	switch {
	case p.dev:
		return "dev"
	case p.anon:
		return "anonymous"
	case p.id.Role == "":
		return "unknown"
	}
	return string(p.id.Role)
}

// annotateGrant puts a grant's task, epoch and worker on the request's span.
func annotateGrant(c *call, g api.Grant, err error) {
	span := trace.SpanFromContext(c.ctx)
	if !span.IsRecording() || err != nil {
		return
	}
	span.SetAttributes(fenceotel.TaskID.String(g.Task.ID), fenceotel.Epoch.String(strconv.FormatUint(g.Lease.Epoch, 10)),
		fenceotel.Worker.String(g.Lease.WorkerID))
}

// annotateTask puts a task and the epoch a command named (or its current
// lease's) on the request's span.
func annotateTask(c *call, task string, epoch uint64, t *lease.Task) {
	span := trace.SpanFromContext(c.ctx)
	if !span.IsRecording() {
		return
	}
	if epoch == 0 && t != nil && t.Lease != nil {
		epoch = t.Lease.Epoch
	}
	span.SetAttributes(fenceotel.TaskID.String(task))
	if epoch != 0 {
		span.SetAttributes(fenceotel.Epoch.String(strconv.FormatUint(epoch, 10)))
	}
}

// forwardTrace makes the relay to the leader continue the trace: the
// follower's span when it traces, else the caller's own traceparent.
func forwardTrace(tc context.Context, rc *fasthttp.RequestCtx, req *fasthttp.Request) {
	if trace.SpanContextFromContext(tc).IsValid() {
		fasthttptrace.Inject(tc, &req.Header)
		return
	}
	for _, h := range []string{"traceparent", "tracestate"} {
		if v := rc.Request.Header.Peek(h); len(v) > 0 {
			req.Header.SetBytesV(h, v)
		}
	}
}

// withTrace appends the trace and span id of tc's span to fields; outside
// a span it returns fields as they are.
func withTrace(tc context.Context, fields ...zap.Field) []zap.Field {
	if tid, sid, ok := fenceotel.IDs(tc); ok {
		return append(fields, zap.String(fenceotel.LogTraceID, tid), zap.String(fenceotel.LogSpanID, sid))
	}
	return fields
}
