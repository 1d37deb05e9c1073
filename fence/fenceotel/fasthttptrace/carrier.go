// Package fasthttptrace is the OTel glue for fasthttp, whose headers are
// not net/http headers: a propagation carrier over them, and the server
// span every fasthttp server of fencepost (the cluster API, the reference
// fenced service) opens per request by the OTel HTTP semantic conventions.
// It lives apart from fenceotel so net/http services do not pull fasthttp
// in, and uses the OTel API only.
package fasthttptrace

import (
	"context"
	"encoding/hex"
	"strconv"

	"github.com/fencepost/fencepost/fence/fenceotel"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Carrier is a propagation.TextMapCarrier over a fasthttp request header.
// Names match whatever their case: a header may keep the spelling it came
// with (the sidecar disables fasthttp's normalizing to forward headers as
// sent), and Go clients send "Traceparent".
type Carrier struct{ H *fasthttp.RequestHeader }

// Get returns the first value of key.
func (c Carrier) Get(key string) string {
	if v := c.H.Peek(key); len(v) > 0 {
		return string(v)
	}
	for k, v := range c.H.All() {
		if equalFold(k, key) {
			return string(v)
		}
	}
	return ""
}

// Set replaces every value of key, in any spelling, with value.
func (c Carrier) Set(key, value string) {
	delAll(c.H, key)
	c.H.Set(key, value)
}

// delAll removes every spelling of key from h without allocating: each
// match is copied out of h's buffer before it is deleted (deleting while
// h.All iterates would move the buffer under the loop).
func delAll(h *fasthttp.RequestHeader, key string) {
	var name [64]byte
	for len(key) <= len(name) {
		n := 0
		for k := range h.All() {
			if equalFold(k, key) {
				n = copy(name[:], k)
				break
			}
		}
		if n == 0 {
			return
		}
		h.DelBytes(name[:n])
	}
}

// InjectSpanContext writes sc as traceparent (and its tracestate, when it
// has one) into h, replacing the worker's, as the W3C propagator writes
// it — without a context to carry sc or a string per header. Nothing is
// written for an invalid sc.
func InjectSpanContext(sc trace.SpanContext, h *fasthttp.RequestHeader) {
	if !sc.IsValid() {
		return
	}
	var b [55]byte // 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>
	tid, sid := sc.TraceID(), sc.SpanID()
	b[0], b[1], b[2] = '0', '0', '-'
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	// Only the flags the W3C level 2 defines go on, as the propagator does.
	hex.Encode(b[53:55], []byte{byte(sc.TraceFlags() & (trace.FlagsSampled | trace.FlagsRandom))})
	delAll(h, headerTraceparent)
	h.SetBytesV(headerTraceparent, b[:])
	if ts := sc.TraceState(); ts.Len() > 0 {
		Carrier{h}.Set(headerTracestate, ts.String())
	}
}

// The W3C trace context headers.
const (
	headerTraceparent = "traceparent"
	headerTracestate  = "tracestate"
)

// equalFold compares an ASCII header name with key, ignoring case, without
// copying the name (the carrier runs on every traced request).
func equalFold(name []byte, key string) bool {
	if len(name) != len(key) {
		return false
	}
	for i := range len(name) {
		a, b := name[i], key[i]
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

// Keys lists the header names present.
func (c Carrier) Keys() []string {
	var out []string
	for k := range c.H.All() {
		out = append(out, string(k))
	}
	return out
}

// Extract returns ctx carrying the remote span context of h's traceparent
// and tracestate, or ctx unchanged when h has none.
func Extract(ctx context.Context, h *fasthttp.RequestHeader) context.Context {
	return fenceotel.Propagator.Extract(ctx, Carrier{h})
}

// Inject writes ctx's span context into h as traceparent and tracestate.
func Inject(ctx context.Context, h *fasthttp.RequestHeader) {
	fenceotel.Propagator.Inject(ctx, Carrier{h})
}

// StartServer opens the server span of one request, continuing the
// caller's traceparent: named "METHOD route" (route is the matched
// template, never the raw path, so names stay few), with the request
// attributes of the HTTP semantic conventions. parent is usually
// context.Background(); opts add to the span's (a start time, say).
func StartServer(parent context.Context, tr trace.Tracer, rc *fasthttp.RequestCtx, route string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	ctx := Extract(parent, &rc.Request.Header)
	method := string(rc.Method())
	scheme := "http"
	if rc.IsTLS() {
		scheme = "https"
	}
	attrs := []attribute.KeyValue{
		semconv.HTTPRequestMethodKey.String(method),
		semconv.URLPath(string(rc.Path())),
		semconv.URLScheme(scheme),
		semconv.HTTPRoute(route),
		semconv.NetworkPeerAddress(rc.RemoteIP().String()),
	}
	if host, port, ok := SplitHostPort(string(rc.Host())); ok {
		attrs = append(attrs, semconv.ServerAddress(host), semconv.ServerPort(port))
	}
	if ua := rc.UserAgent(); len(ua) > 0 {
		attrs = append(attrs, semconv.UserAgentOriginal(string(ua)))
	}
	opts = append(opts, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	return tr.Start(ctx, method+" "+route, opts...)
}

// EndServer records the response status and ends span. A 5xx is an error
// (a server span's 4xx is the client's fault, per the conventions).
func EndServer(span trace.Span, rc *fasthttp.RequestCtx) {
	status := rc.Response.StatusCode()
	span.SetAttributes(semconv.HTTPResponseStatusCode(status))
	if status >= 500 {
		span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(status)))
		span.SetStatus(codes.Error, "")
	}
	span.End()
}

// SplitHostPort splits a Host header or an authority for server.address
// and server.port; ok is false without a numeric port.
func SplitHostPort(hostport string) (string, int, bool) {
	for i := len(hostport) - 1; i >= 0; i-- {
		if hostport[i] == ':' {
			p, err := strconv.Atoi(hostport[i+1:])
			if err != nil {
				return hostport, 0, false
			}
			h := hostport[:i]
			if len(h) > 1 && h[0] == '[' && h[len(h)-1] == ']' {
				h = h[1 : len(h)-1]
			}
			return h, p, true
		}
		if hostport[i] == ']' {
			break
		}
	}
	return hostport, 0, false
}
