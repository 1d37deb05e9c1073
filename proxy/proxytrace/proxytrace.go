// Package proxytrace is the sidecar's tracing: one span per proxied request
// (plain, carried by a CONNECT tunnel, or intercepted HTTPS) that continues
// the worker's traceparent/tracestate, attributed by the OTel HTTP
// semantic conventions for a client call plus the fencepost attributes
// (task, epoch, decision, idempotency key), and a short span per lease
// lifecycle event (acquired, lost, revived, revoked, released).
//
// It is written against the OTel API; the process's SDK comes from
// config/tracing through the command wiring, and when that provider
// offers a tracing.Recorder the request spans are made by it instead of
// the SDK (the same sampler, processor and export, at a fraction of the
// cost per request). A nil *Tracer is tracing off: every method
// is then a nil check that allocates nothing, so the request path pays
// nothing when tracing is off.
package proxytrace

import (
	"bytes"
	"context"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/config/tracing"
	"github.com/fencepost/fencepost/fence/fenceotel"
	"github.com/fencepost/fencepost/fence/fenceotel/fasthttptrace"
)

// tracerName is the instrumentation scope of the sidecar's spans.
const tracerName = "github.com/fencepost/fencepost/proxy"

// Entry is how a request reached the pipeline: attribute
// fencepost.proxy.entry.
type Entry string

// The entries.
const (
	// EntryProxy is an absolute-form request on the proxy port.
	EntryProxy Entry = "proxy"
	// EntryConnect is a plain HTTP request read inside a CONNECT tunnel.
	EntryConnect Entry = "connect"
	// EntryIntercepted is a request read inside intercepted TLS.
	EntryIntercepted Entry = "intercepted"
)

// entryKey is the attribute of Entry.
const entryKey = attribute.Key("fencepost.proxy.entry")

// Tracer makes the sidecar's spans. The nil *Tracer is off.
type Tracer struct {
	tr trace.Tracer
	// rec makes the request spans when the provider offers a Recorder
	// (config/tracing's, over its OTLP/HTTP exporter): a span there costs
	// a fraction of the SDK's (BENCHMARKS.md, "Traces"). Lease events
	// always go through tr.
	rec   *tracing.Recorder
	epoch atomic.Pointer[epochText] // the last epoch's text
	// last holds each task's latest lease event span (task -> its
	// trace.SpanContext), which a blocked request links to.
	last sync.Map
}

// recorders is a provider that offers a Recorder (*tracing.Provider).
type recorders interface {
	Recorder(name string) *tracing.Recorder
}

// New returns a Tracer over tp, or nil (off) when tp is nil.
func New(tp trace.TracerProvider) *Tracer {
	if tp == nil {
		return nil
	}
	t := &Tracer{tr: tp.Tracer(tracerName)}
	if r, ok := tp.(recorders); ok {
		t.rec = r.Recorder(tracerName)
	}
	return t
}

// Request is the span of one proxied request, kept by value in the
// request's own (stack) state so a traced request allocates no span
// state of its own. Its zero value (what an off Tracer returns) ignores
// every call, as does a nil *Request. Over a Recorder the span comes from
// the Recorder's pool and takes each attribute as it is learnt. Over the
// SDK the attributes are kept here and handed to the span once, at End:
// one lock and one de-duplication pass instead of one per step. Nothing
// touches the span after End (a Recorder's is then reused): the ids stay
// in sc.
type Request struct {
	t     *Tracer
	span  trace.Span      // lean, when over a Recorder
	lean  *tracing.Span   // nil over the SDK
	ctx   context.Context // the SDK span's context, for Inject
	sc    trace.SpanContext
	task  string // the task recorded by Lease, whose lease event a block links to
	attrs []attribute.KeyValue
	ended bool
	// failed: an error status with its description is set, which End's
	// bare status-code error must not replace.
	failed bool
}

// maxAttrs bounds the attributes a request collects before End over the
// SDK: the method, the entry, url.full, server.address, server.port,
// task, epoch, idempotency key, decision, block reason, error.type,
// status, and room to spare.
const maxAttrs = 14

// add records one attribute.
func (r *Request) add(kv attribute.KeyValue) {
	switch {
	case r.lean != nil:
		r.lean.SetAttributes(kv)
	case len(r.attrs) == cap(r.attrs):
		r.span.SetAttributes(kv)
	default:
		r.attrs = append(r.attrs, kv)
	}
}

// live reports whether r still has a span to record into.
func (r *Request) live() bool { return r != nil && r.t != nil && !r.ended }

// startOpts are the start options of every request span, built once:
// building them per request cost three allocations.
var startOpts = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}

// Start opens the span of one request as it arrives, continuing the
// worker's traceparent: a client span (the sidecar calls upstream on the
// worker's behalf) named by the request's method, as the HTTP conventions
// name a client span without a URL template. Over the SDK the method and
// entry attributes are handed over at End with the others rather than at
// the start (one attribute copy instead of two): fencepost's samplers
// (config/tracing) do not look at attributes.
func (t *Tracer) Start(rc *fasthttp.RequestCtx, in Entry) Request {
	if t == nil {
		return Request{}
	}
	ctx := fasthttptrace.Extract(context.Background(), &rc.Request.Header)
	method := methodName(rc.Method())
	r := Request{t: t}
	if t.rec != nil {
		r.lean = t.rec.Start(ctx, method, trace.SpanKindClient)
		r.span = r.lean
	} else {
		r.ctx, r.span = t.tr.Start(ctx, method, startOpts...)
		r.attrs = make([]attribute.KeyValue, 0, maxAttrs)
	}
	r.sc = r.span.SpanContext()
	r.add(semconv.HTTPRequestMethodKey.String(method))
	r.add(entryKey.String(string(in)))
	return r
}

// methodName is m as a string, without an allocation for the common
// methods.
func methodName(m []byte) string {
	switch string(m) {
	case fasthttp.MethodGet:
		return fasthttp.MethodGet
	case fasthttp.MethodPost:
		return fasthttp.MethodPost
	case fasthttp.MethodPut:
		return fasthttp.MethodPut
	case fasthttp.MethodPatch:
		return fasthttp.MethodPatch
	case fasthttp.MethodDelete:
		return fasthttp.MethodDelete
	case fasthttp.MethodHead:
		return fasthttp.MethodHead
	case fasthttp.MethodOptions:
		return fasthttp.MethodOptions
	}
	return string(m)
}

// On reports whether r records anything.
func (r *Request) On() bool { return r != nil && r.t != nil }

// Target records the upstream target once parsed: url.full (tls picks
// https; uri is authority, path and query without the scheme),
// server.address and server.port.
func (r *Request) Target(tls bool, uri []byte, hostPort string) {
	if !r.live() {
		return
	}
	scheme := "http://"
	if tls {
		scheme = "https://"
	}
	if r.lean != nil {
		r.lean.SetJoinedString(semconv.URLFullKey, scheme, uri)
	} else {
		r.add(semconv.URLFull(scheme + string(uri)))
	}
	if host, port, ok := fasthttptrace.SplitHostPort(hostPort); ok {
		r.add(semconv.ServerAddress(host))
		r.add(semconv.ServerPort(port))
	}
}

// Lease records the task (once) and, when the request is stamped, the
// epoch.
func (r *Request) Lease(task string, epoch uint64) {
	if !r.live() {
		return
	}
	if task != "" && r.task == "" {
		r.task = task
		r.add(fenceotel.TaskID.String(task))
	}
	if epoch != 0 {
		r.add(fenceotel.Epoch.String(r.t.epochString(epoch)))
	}
}

// epochText is an epoch and its decimal text.
type epochText struct {
	n uint64
	s string
}

// epochString is epoch in decimal, reusing the last one made: a sidecar's
// requests run under one epoch until its lease changes, so this saves an
// allocation per request.
func (t *Tracer) epochString(epoch uint64) string {
	if e := t.epoch.Load(); e != nil && e.n == epoch {
		return e.s
	}
	e := &epochText{n: epoch, s: strconv.FormatUint(epoch, 10)}
	t.epoch.Store(e)
	return e.s
}

// IdempotencyKey records the key the request was sent (or replayed) with.
func (r *Request) IdempotencyKey(key string) {
	if r.live() && key != "" {
		r.add(fenceotel.IdempotencyKey.String(key))
	}
}

// Inject names this span in the upstream request's traceparent (and
// carries the worker's tracestate on), replacing the worker's.
func (r *Request) Inject(h *fasthttp.RequestHeader) {
	switch {
	case !r.live():
	case r.ctx == nil:
		fasthttptrace.InjectSpanContext(r.sc, h)
	default:
		fasthttptrace.Inject(r.ctx, h)
	}
}

// Decision records what the sidecar did with the request: forwarded,
// replayed (from the journal) or in_doubt.
func (r *Request) Decision(d string) {
	if r.live() {
		r.add(fenceotel.Decision.String(d))
	}
}

// Blocked records a refused request (no upstream call was made): decision
// blocked, the reason, the epoch the lease had, an error status, and a
// link to the latest lease event span of the task Lease recorded (the
// loss or revocation that blocked it).
func (r *Request) Blocked(reason string, epoch uint64) {
	if !r.live() {
		return
	}
	r.add(fenceotel.Decision.String(fenceotel.DecisionBlocked))
	r.add(fenceotel.BlockReason.String(reason))
	r.Lease("", epoch)
	if sc, ok := r.t.last.Load(r.task); ok && r.task != "" {
		r.span.AddLink(trace.Link{SpanContext: sc.(trace.SpanContext)})
	}
	r.span.SetStatus(codes.Error, "blocked: "+reason)
	r.failed = true
}

// Failed records an upstream call that failed (error.type, error status).
func (r *Request) Failed(err error) {
	if !r.live() || err == nil {
		return
	}
	r.add(semconv.ErrorTypeKey.String(errorType(err)))
	r.span.SetStatus(codes.Error, err.Error())
	r.failed = true
}

// End records the status answered to the worker, hands the span every
// attribute collected, and ends it. A client span's 4xx and 5xx are
// errors, per the conventions.
func (r *Request) End(status int) {
	if !r.live() {
		return
	}
	if status > 0 {
		r.add(semconv.HTTPResponseStatusCode(status))
		if status >= 400 && !r.failed {
			r.span.SetStatus(codes.Error, "")
		}
	}
	if len(r.attrs) > 0 {
		r.span.SetAttributes(r.attrs...)
	}
	r.ended = true
	r.span.End()
}

// TraceID is the W3C trace id the request runs under: its span's, or,
// with tracing off, the one in the worker's traceparent (h); "" when
// there is neither. A blocked write's report names it, so the console
// links the block to the worker's trace either way.
func (r *Request) TraceID(h *fasthttp.RequestHeader) string {
	if r.On() {
		return r.sc.TraceID().String()
	}
	// The sidecar's server keeps header names as sent, so the lookup
	// folds case itself (Go's client sends "Traceparent").
	var tp []byte
	for k, v := range h.All() {
		if len(k) == len("traceparent") && bytes.EqualFold(k, []byte("traceparent")) {
			tp = v
			break
		}
	}
	if len(tp) == 0 {
		return ""
	}
	ctx := fenceotel.Propagator.Extract(context.Background(), traceparent(tp))
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		return sc.TraceID().String()
	}
	return ""
}

// traceparent carries one traceparent header to the propagator.
type traceparent []byte

func (t traceparent) Get(key string) string {
	if key == "traceparent" {
		return string(t)
	}
	return ""
}
func (t traceparent) Set(string, string) {}
func (t traceparent) Keys() []string     { return []string{"traceparent"} }

// LogFields returns fields with the request's trace and span ids added,
// for a log line written while serving it.
func (r *Request) LogFields(fields ...zap.Field) []zap.Field {
	if !r.On() {
		return fields
	}
	sc := r.sc
	return append(fields, zap.String(fenceotel.LogTraceID, sc.TraceID().String()),
		zap.String(fenceotel.LogSpanID, sc.SpanID().String()))
}

// LeaseEvent records one lease lifecycle event as a short span named
// "lease <kind>" with the task, the epoch and the reason, so a trace
// search for a task shows the epoch change that blocked its calls.
func (t *Tracer) LeaseEvent(kind, task string, epoch uint64, reason string) {
	if t == nil {
		return
	}
	attrs := []attribute.KeyValue{fenceotel.TaskID.String(task), attribute.String("fencepost.lease.event", kind)}
	if epoch != 0 {
		attrs = append(attrs, fenceotel.Epoch.String(strconv.FormatUint(epoch, 10)))
	}
	if reason != "" {
		attrs = append(attrs, attribute.String("fencepost.lease.reason", reason))
	}
	_, span := t.tr.Start(context.Background(), "lease "+kind, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrs...))
	span.End()
	// A released task is done here: forget it, so the map stays as small
	// as the set of tasks held.
	if sc := span.SpanContext(); sc.IsValid() && kind != "released" {
		t.last.Store(task, sc)
	} else {
		t.last.Delete(task)
	}
}

// errorType is error.type, from a small fixed set: timeout or
// upstream_error.
func errorType(err error) string {
	if t, ok := err.(interface{ Timeout() bool }); ok && t.Timeout() {
		return "timeout"
	}
	return "upstream_error"
}
