package proxytrace

import (
	"bytes"
	"context"
	"strings"

	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencepost/fencepost/fence/fenceotel/fasthttptrace"
)

// clusterTracerName is the instrumentation scope of the sidecar's spans
// around its own calls to the cluster.
const clusterTracerName = "github.com/fencepost/fencepost/proxy/cluster"

// ClusterHook returns the hook of proxy/cluster's Config.Trace for tp, or
// nil (off) when tp is nil. Each attempt of a lease call the sidecar makes
// (acquire, claim, checkpoint, release, the journal, opening and closing
// its session: every POST and DELETE) becomes a client span named
// "METHOD route", under the span the call's context carries (a worker's
// control call brings its own traceparent) or as a root; the attempt's
// traceparent names that span, so the cluster's server span is its child.
// Heartbeats, watches and streams are not traced: they come every few
// seconds from every sidecar and would drown the traces.
func ClusterHook(tp trace.TracerProvider) func(context.Context, *fasthttp.Request) func(int, error) {
	if tp == nil {
		return nil
	}
	tr := tp.Tracer(clusterTracerName)
	return func(ctx context.Context, req *fasthttp.Request) func(int, error) {
		method := req.Header.Method()
		if !bytes.Equal(method, []byte(fasthttp.MethodPost)) && !bytes.Equal(method, []byte(fasthttp.MethodDelete)) {
			return nil
		}
		path := string(req.URI().PathOriginal())
		route, ok := clusterRoute(path)
		if !ok {
			return nil
		}
		m := string(method)
		ctx, span := tr.Start(ctx, m+" "+route, trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(semconv.HTTPRequestMethodKey.String(m), semconv.URLFull(req.URI().String()),
				semconv.URLTemplate(route)))
		fasthttptrace.Inject(ctx, &req.Header)
		return func(status int, err error) {
			if err != nil {
				span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
				span.SetStatus(codes.Error, err.Error())
			} else {
				span.SetAttributes(semconv.HTTPResponseStatusCode(status))
				if status >= 400 {
					span.SetStatus(codes.Error, "")
				}
			}
			span.End()
		}
	}
}

// clusterRoute turns a cluster API path into its template (api.Path*), so
// span names stay few: the segment after tasks/ is {id}, after sessions/
// {sid}, after journal/ {key}. ok is false for the session's heartbeat,
// watch and stream, which are not traced.
func clusterRoute(path string) (string, bool) {
	segs := strings.Split(path, "/")
	for i := 1; i < len(segs); i++ {
		switch segs[i-1] {
		case "tasks":
			segs[i] = "{id}"
		case "sessions":
			segs[i] = "{sid}"
			if i+1 < len(segs) {
				return "", false // heartbeat, watch, stream
			}
		case "journal":
			segs[i] = "{key}"
		}
	}
	return strings.Join(segs, "/"), true
}
