package tracing

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"
)

// Recorder makes spans outside the SDK's span objects, for a path that
// opens one span per proxied request. An SDK span costs about 4 µs of a
// ~35 µs sidecar request (BENCHMARKS.md, "Traces"): its object, context,
// attribute copy, read-only snapshot and de-duplication map are seven
// allocations. A Recorder's Span lives inside its caller's own per-request
// state, takes its attributes into an inline array, and is queued as it is
// to the provider's batcher, whose exporter encodes it like an SDK span.
//
// It keeps the SDK's behaviour where an exported span shows it: the
// provider's sampler decides (parent-based by default), ids come from the
// same kind of random source, the span limits come from the same
// OTEL_SPAN_* / OTEL_ATTRIBUTE_* variables, the status rules are the
// SDK's, and attributes are de-duplicated, last value winning.
//
// A Recorder exists only where its spans can be exported without a
// conversion: with fencepost's OTLP/HTTP protobuf exporter (the default
// OTLP setup). Provider.Recorder is nil otherwise, and callers then use
// the SDK's Tracer.
type Recorder struct {
	res    *resource.Resource
	scope  instrumentation.Scope
	smp    sdktrace.Sampler
	b      *batcher
	limits leanLimits
	pool   sync.Pool // of *Span, ended and exported
}

// leanLimits are the span limits a Span applies.
type leanLimits struct {
	attrs, valueLen, links, events int // negative: unlimited
}

// The SDK's default span limits (sdktrace.DefaultAttributeCountLimit and
// friends).
const (
	sdkDefaultAttributeCount = 128
	sdkDefaultLinkCount      = 128
	sdkDefaultEventCount     = 128
)

// readLeanLimits reads the span limits as sdktrace.NewSpanLimits does: the
// span-specific variable first, then the general one.
func readLeanLimits() leanLimits {
	return leanLimits{
		attrs:    firstInt(sdkDefaultAttributeCount, "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT"),
		valueLen: firstInt(-1, "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT"),
		links:    firstInt(sdkDefaultLinkCount, "OTEL_SPAN_LINK_COUNT_LIMIT"),
		events:   firstInt(sdkDefaultEventCount, "OTEL_SPAN_EVENT_COUNT_LIMIT"),
	}
}

// firstInt is the first of keys that is set, as an integer; def when none
// is set or the first set one is not an integer (as the SDK reads them).
func firstInt(def int, keys ...string) int {
	for _, k := range keys {
		v := os.Getenv(k)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return def
		}
		return n
	}
	return def
}

// leanInline is how many attributes a Span holds without an allocation:
// the sidecar's request span has at most 13.
const leanInline = 14

// Span is one span made by a Recorder.
// Unlike an SDK span it is not safe for concurrent use: it belongs to the
// goroutine serving one request, which must not touch it after End (the
// exporter reads it then). It implements the OTel API's trace.Span.
type Span struct {
	embedded.Span

	r          *Recorder
	sc, parent trace.SpanContext
	name       string
	kind       trace.SpanKind
	start, end time.Time
	recording  bool
	ended      bool
	status     sdktrace.Status
	attrs      []attribute.KeyValue // over inline, or its own array when full
	inline     [leanInline]attribute.KeyValue
	dropped    int
	links      []sdktrace.Link
	droppedLk  int
	events     []sdktrace.Event
	droppedEv  int
	// text holds the bytes of the strings SetJoinedString made: they live
	// as long as the span is not handed out again (the exporter reads
	// them before release).
	text []byte
}

// Start begins a span named name of kind, child of the span context in
// parent (a new trace when there is none), sampled by the provider's
// sampler. The Span comes from the Recorder's pool and goes back to it
// once ended and exported: its caller must not touch it after End.
func (r *Recorder) Start(parent context.Context, name string, kind trace.SpanKind) *Span {
	psc := trace.SpanContextFromContext(parent)
	tid := psc.TraceID()
	if !tid.IsValid() {
		tid = newTraceID()
	}
	sid := newSpanID()
	res := r.smp.ShouldSample(sdktrace.SamplingParameters{ParentContext: parent, TraceID: tid, Name: name, Kind: kind})
	flags := psc.TraceFlags() &^ trace.FlagsSampled
	if res.Decision == sdktrace.RecordAndSample {
		flags |= trace.FlagsSampled
	}
	s, _ := r.pool.Get().(*Span)
	if s == nil {
		s = new(Span)
	}
	s.r, s.parent, s.name, s.kind, s.ended = r, psc, name, kind, false
	s.sc = trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, TraceState: res.Tracestate})
	s.recording = res.Decision != sdktrace.Drop
	s.attrs = s.inline[:0]
	if s.recording {
		s.start = time.Now()
	}
	return s
}

// release returns s to its Recorder's pool, holding no reference to what
// it recorded. An ended Span stays ended until Start hands it out again.
func (s *Span) release() {
	r := s.r
	if len(s.attrs) > 0 && &s.attrs[0] == &s.inline[0] {
		clear(s.inline[:len(s.attrs)])
	}
	// Field by field: a whole-struct reset would copy the inline array.
	s.r, s.name, s.attrs, s.links, s.events = nil, "", nil, nil, nil
	// No string made over text is reachable once the span is exported,
	// so its bytes may be written again; an unusually long one is dropped
	// rather than kept for every later span.
	s.text = s.text[:0]
	if cap(s.text) > maxKeptText {
		s.text = nil
	}
	s.sc, s.parent, s.status = trace.SpanContext{}, trace.SpanContext{}, sdktrace.Status{}
	s.dropped, s.droppedLk, s.droppedEv, s.recording = 0, 0, 0, false
	r.pool.Put(s)
}

// newTraceID is a random, valid trace id; newSpanID a random, valid span
// id. math/rand/v2's source is the runtime's per-thread generator, which
// takes no lock.
func newTraceID() (t trace.TraceID) {
	for !t.IsValid() {
		hi, lo := rand.Uint64(), rand.Uint64()
		for i := range 8 {
			t[i], t[8+i] = byte(hi>>(56-8*i)), byte(lo>>(56-8*i))
		}
	}
	return t
}

func newSpanID() (s trace.SpanID) {
	for !s.IsValid() {
		v := rand.Uint64()
		for i := range 8 {
			s[i] = byte(v >> (56 - 8*i))
		}
	}
	return s
}

// live reports whether s still takes data: recording and not ended.
func (s *Span) live() bool { return s != nil && s.recording && !s.ended }

// SetAttributes records kv, replacing an earlier value of the same key,
// within the attribute count limit; strings are cut to the value length
// limit.
func (s *Span) SetAttributes(kv ...attribute.KeyValue) {
	if !s.live() {
		return
	}
	lim := s.r.limits
	for _, a := range kv {
		if !a.Valid() {
			s.dropped++
			continue
		}
		if lim.valueLen >= 0 && a.Value.Type() == attribute.STRING {
			a.Value = attribute.StringValue(cut(a.Value.AsString(), lim.valueLen))
		}
		if i := s.index(a.Key); i >= 0 {
			s.attrs[i] = a
			continue
		}
		if lim.attrs >= 0 && len(s.attrs) >= lim.attrs {
			s.dropped++
			continue
		}
		s.attrs = append(s.attrs, a)
	}
}

// maxKeptText is the most text a pooled span keeps between lives.
const maxKeptText = 1 << 10

// SetJoinedString records key as the string prefix followed by rest, as
// SetAttributes(key.String(prefix+string(rest))) would, without making
// that string on the heap: its bytes are copied into the span's own
// buffer, reused by the span's next life. url.full, made per request,
// was the one allocation a traced request still made for its span.
func (s *Span) SetJoinedString(key attribute.Key, prefix string, rest []byte) {
	if !s.live() {
		return
	}
	if len(rest) == 0 {
		s.SetAttributes(key.String(prefix))
		return
	}
	// A string made over text must not move when text grows later: one
	// that would not fit starts a new array, and the strings made over
	// the old one keep it alive until the span is exported.
	n := len(prefix) + len(rest)
	if cap(s.text)-len(s.text) < n {
		s.text = make([]byte, 0, max(n, 2*cap(s.text), 256))
	}
	at := len(s.text)
	s.text = append(append(s.text, prefix...), rest...)
	s.SetAttributes(key.String(unsafe.String(&s.text[at], n)))
}

// index is where key sits among the attributes, or -1.
func (s *Span) index(key attribute.Key) int {
	for i := range s.attrs {
		if s.attrs[i].Key == key {
			return i
		}
	}
	return -1
}

// cut keeps the first limit characters of v, as the SDK truncates a string
// attribute (a character is a rune; an invalid byte counts as one).
func cut(v string, limit int) string {
	if len(v) <= limit {
		return v
	}
	n := 0
	for i := range v {
		if n == limit {
			return v[:i]
		}
		n++
	}
	return v
}

// AddLink links s to another span, within the link count limit (past it
// the oldest link goes). A link
// to nothing (invalid, no attributes, no tracestate) is ignored, as the
// SDK ignores it.
func (s *Span) AddLink(l trace.Link) {
	if !s.live() || (!l.SpanContext.IsValid() && len(l.Attributes) == 0 && l.SpanContext.TraceState().Len() == 0) {
		return
	}
	s.links, s.droppedLk = evict(s.links, sdktrace.Link{SpanContext: l.SpanContext, Attributes: l.Attributes}, s.r.limits.links, s.droppedLk)
}

// evict appends v to q within limit (negative: none) as the SDK's evicted
// queue does: past the limit the oldest goes, counted in dropped.
func evict[T any](q []T, v T, limit, dropped int) ([]T, int) {
	switch {
	case limit == 0:
		return q, dropped + 1
	case limit > 0 && len(q) >= limit:
		copy(q, q[1:])
		q[len(q)-1] = v
		return q, dropped + 1
	}
	return append(q, v), dropped
}

// SetStatus sets the status by the SDK's rule: Ok is final, Unset never
// overrides, and only Error keeps a description.
func (s *Span) SetStatus(code codes.Code, description string) {
	if !s.live() || s.status.Code > code {
		return
	}
	st := sdktrace.Status{Code: code}
	if code == codes.Error {
		st.Description = description
	}
	s.status = st
}

// End ends s and queues it for export when sampled; s goes back to the
// Recorder's pool once exported, or at once when it is not. Options are
// ignored: the span ends now. A second End does nothing.
func (s *Span) End(...trace.SpanEndOption) {
	if s == nil || s.ended {
		return
	}
	s.ended = true
	if s.recording && s.sc.IsSampled() {
		s.end = time.Now()
		if s.r.b.enqueue(s) {
			return
		}
	}
	s.release()
}

// SpanContext is s's identity, valid once started.
func (s *Span) SpanContext() trace.SpanContext { return s.sc }

// IsRecording reports whether s records data (sampled or record-only) and
// has not ended.
func (s *Span) IsRecording() bool { return s.live() }

// SetName renames s.
func (s *Span) SetName(name string) {
	if s.live() {
		s.name = name
	}
}

// AddEvent records an event, within the event count limit (past it the
// oldest event goes).
func (s *Span) AddEvent(name string, opts ...trace.EventOption) {
	if !s.live() {
		return
	}
	c := trace.NewEventConfig(opts...)
	s.events, s.droppedEv = evict(s.events, sdktrace.Event{Name: name, Attributes: c.Attributes(), Time: c.Timestamp()},
		s.r.limits.events, s.droppedEv)
}

// RecordError records err as the SDK does: an "exception" event with its
// type and message. It does not set the status.
func (s *Span) RecordError(err error, opts ...trace.EventOption) {
	if err == nil || !s.live() {
		return
	}
	opts = append(opts, trace.WithAttributes(semconv.ExceptionType(typeName(err)), semconv.ExceptionMessage(err.Error())))
	s.AddEvent(semconv.ExceptionEventName, opts...)
}

// typeName names err's type as the SDK's RecordError does: the package
// path and name of a named type, else the type as Go writes it.
func typeName(err error) string {
	t := reflect.TypeOf(err)
	if t.PkgPath() == "" && t.Name() == "" {
		return t.String()
	}
	return fmt.Sprintf("%s.%s", t.PkgPath(), t.Name())
}

// noopProvider is what a Recorder's Span names as its provider.
var noopProvider trace.TracerProvider = noop.NewTracerProvider()

// TracerProvider is the no-op provider: a Recorder's spans start no
// children through it.
func (s *Span) TracerProvider() trace.TracerProvider { return noopProvider }

// The read side, which the batcher and the encoder use once s has ended
// (the subset of sdktrace.ReadOnlySpan that spanData names).

// Parent is the span context s continued.
func (s *Span) Parent() trace.SpanContext { return s.parent }

// Name is s's name.
func (s *Span) Name() string { return s.name }

// SpanKind is s's kind.
func (s *Span) SpanKind() trace.SpanKind { return s.kind }

// StartTime is when s started.
func (s *Span) StartTime() time.Time { return s.start }

// EndTime is when s ended.
func (s *Span) EndTime() time.Time { return s.end }

// Attributes are s's attributes, each key once.
func (s *Span) Attributes() []attribute.KeyValue { return s.attrs }

// Links are s's links.
func (s *Span) Links() []sdktrace.Link { return s.links }

// Events are s's events.
func (s *Span) Events() []sdktrace.Event { return s.events }

// Status is s's status.
func (s *Span) Status() sdktrace.Status { return s.status }

// DroppedAttributes counts the attributes over the limit or invalid.
func (s *Span) DroppedAttributes() int { return s.dropped }

// DroppedLinks counts the links over the limit.
func (s *Span) DroppedLinks() int { return s.droppedLk }

// DroppedEvents counts the events over the limit.
func (s *Span) DroppedEvents() int { return s.droppedEv }

// Resource is the provider's resource.
func (s *Span) Resource() *resource.Resource { return s.r.res }

// InstrumentationScope is the Recorder's scope.
func (s *Span) InstrumentationScope() instrumentation.Scope { return s.r.scope }
