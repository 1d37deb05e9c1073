package tracing

import (
	"math"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// The OTLP protobuf encoding of finished spans, written straight from the
// SDK's ReadOnlySpans into one reused buffer. The stock OTLP exporter first
// builds a tree of generated proto structs (two allocations per attribute,
// a dozen per span) and then marshals it; at one span per proxied request
// that transform was about a third of tracing's cost (BENCHMARKS.md,
// "Traces"). The output is the message the stock exporter sends, field for
// field (TestWireMatchesTheStockExporter decodes both and compares them).
//
// Field numbers are those of opentelemetry/proto/{collector/trace,trace,
// common,resource}/v1 at go.opentelemetry.io/proto/otlp v1.

// Field numbers, by message.
const (
	fRequestResourceSpans = 1 // ExportTraceServiceRequest.resource_spans

	fResourceSpansResource   = 1
	fResourceSpansScopeSpans = 2
	fResourceSpansSchemaURL  = 3

	fResourceAttributes = 1

	fScopeSpansScope     = 1
	fScopeSpansSpans     = 2
	fScopeSpansSchemaURL = 3

	fScopeName       = 1
	fScopeVersion    = 2
	fScopeAttributes = 3

	fSpanTraceID       = 1
	fSpanSpanID        = 2
	fSpanTraceState    = 3
	fSpanParentSpanID  = 4
	fSpanName          = 5
	fSpanKind          = 6
	fSpanStart         = 7
	fSpanEnd           = 8
	fSpanAttributes    = 9
	fSpanDroppedAttrs  = 10
	fSpanEvents        = 11
	fSpanDroppedEvents = 12
	fSpanLinks         = 13
	fSpanDroppedLinks  = 14
	fSpanStatus        = 15
	fSpanFlags         = 16

	fEventTime         = 1
	fEventName         = 2
	fEventAttributes   = 3
	fEventDroppedAttrs = 4

	fLinkTraceID      = 1
	fLinkSpanID       = 2
	fLinkTraceState   = 3
	fLinkAttributes   = 4
	fLinkDroppedAttrs = 5
	fLinkFlags        = 6

	fStatusMessage = 2
	fStatusCode    = 3

	fKeyValueKey   = 1
	fKeyValueValue = 2

	fAnyString = 1
	fAnyBool   = 2
	fAnyInt    = 3
	fAnyDouble = 4
	fAnyArray  = 5
	fAnyKVList = 6
	fAnyBytes  = 7

	fArrayValues = 1 // ArrayValue.values and KeyValueList.values alike
)

// The OTLP span flags beside the W3C trace flags in the low byte: whether
// the parent is known to be remote, and whether it is.
const (
	flagHasIsRemote = 0x100
	flagIsRemote    = 0x200
)

// OTLP status codes, which number OK and ERROR the other way round from
// the API's codes.
const (
	statusOK    = 1
	statusError = 2
)

// spanData is what the encoder and the batcher read of an ended span: a
// subset of sdktrace.ReadOnlySpan's methods, so the SDK's spans and a
// Recorder's Spans are queued and encoded alike.
type spanData interface {
	SpanContext() trace.SpanContext
	Parent() trace.SpanContext
	Name() string
	SpanKind() trace.SpanKind
	StartTime() time.Time
	EndTime() time.Time
	Attributes() []attribute.KeyValue
	Links() []sdktrace.Link
	Events() []sdktrace.Event
	Status() sdktrace.Status
	DroppedAttributes() int
	DroppedLinks() int
	DroppedEvents() int
	Resource() *resource.Resource
	InstrumentationScope() instrumentation.Scope
}

// wire is an encoder of export requests. Its buffer and grouping slices
// are kept between requests, so a warm encoder allocates nothing. It is
// not safe for concurrent use.
type wire struct {
	b      []byte
	groups []group
	done   []bool // groups already written, during encode
}

// group is the spans of one resource and instrumentation scope, in the
// order they came: OTLP nests spans under both.
type group struct {
	res   attribute.Distinct
	scope instrumentation.Scope
	spans []spanData
}

// encode returns the ExportTraceServiceRequest of spans. The slice is the
// encoder's own buffer, valid until the next call.
func (w *wire) encode(spans []spanData) []byte {
	w.b = w.b[:0]
	w.forget()
	n := 0
	for _, s := range spans {
		if s == nil {
			continue
		}
		res, scope := s.Resource().Equivalent(), s.InstrumentationScope()
		i := 0
		for i < n && (w.groups[i].res != res || w.groups[i].scope != scope) {
			i++
		}
		if i == n {
			if n == len(w.groups) {
				w.groups = append(w.groups, group{})
			}
			w.groups[n].res, w.groups[n].scope = res, scope
			n++
		}
		w.groups[i].spans = append(w.groups[i].spans, s)
	}
	// One ResourceSpans per resource, holding its scopes in order.
	w.done = append(w.done[:0], make([]bool, n)...)
	done := w.done
	for i := range n {
		if done[i] {
			continue
		}
		res := w.groups[i].spans[0].Resource()
		rs := w.open(fRequestResourceSpans)
		if res != nil {
			r := w.open(fResourceSpansResource)
			for it := res.Iter(); it.Next(); {
				w.keyValue(fResourceAttributes, it.Attribute())
			}
			w.close(r)
		}
		for j := i; j < n; j++ {
			if done[j] || w.groups[j].res != w.groups[i].res {
				continue
			}
			done[j] = true
			w.scopeSpans(&w.groups[j])
		}
		if res != nil {
			w.str(fResourceSpansSchemaURL, res.SchemaURL())
		}
		w.close(rs)
	}
	return w.b
}

// forget drops the encoder's references to the last batch's spans, so a
// kept encoder does not keep them alive.
func (w *wire) forget() {
	for i := range w.groups {
		clear(w.groups[i].spans)
		w.groups[i].spans = w.groups[i].spans[:0]
	}
}

// scopeSpans writes one ScopeSpans.
func (w *wire) scopeSpans(g *group) {
	ss := w.open(fResourceSpansScopeSpans)
	if g.scope != (instrumentation.Scope{}) {
		sc := w.open(fScopeSpansScope)
		w.str(fScopeName, g.scope.Name)
		w.str(fScopeVersion, g.scope.Version)
		for it := g.scope.Attributes.Iter(); it.Next(); {
			w.keyValue(fScopeAttributes, it.Attribute())
		}
		w.close(sc)
	}
	for _, s := range g.spans {
		w.span(s)
	}
	w.str(fScopeSpansSchemaURL, g.scope.SchemaURL)
	w.close(ss)
}

// span writes one Span.
func (w *wire) span(s spanData) {
	at := w.open(fScopeSpansSpans)
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	w.bytes(fSpanTraceID, tid[:])
	w.bytes(fSpanSpanID, sid[:])
	if ts := sc.TraceState(); ts.Len() > 0 {
		w.str(fSpanTraceState, ts.String())
	}
	parent := s.Parent()
	if psid := parent.SpanID(); psid.IsValid() {
		w.bytes(fSpanParentSpanID, psid[:])
	}
	w.str(fSpanName, s.Name())
	w.varint(fSpanKind, uint64(spanKind(s.SpanKind())))
	w.fixed64(fSpanStart, unixNano(s.StartTime().UnixNano()))
	w.fixed64(fSpanEnd, unixNano(s.EndTime().UnixNano()))
	for _, kv := range s.Attributes() {
		w.keyValue(fSpanAttributes, kv)
	}
	w.varint(fSpanDroppedAttrs, clamp32(s.DroppedAttributes()))
	for _, e := range s.Events() {
		ev := w.open(fSpanEvents)
		w.fixed64(fEventTime, unixNano(e.Time.UnixNano()))
		w.str(fEventName, e.Name)
		for _, kv := range e.Attributes {
			w.keyValue(fEventAttributes, kv)
		}
		w.varint(fEventDroppedAttrs, clamp32(e.DroppedAttributeCount))
		w.close(ev)
	}
	w.varint(fSpanDroppedEvents, clamp32(s.DroppedEvents()))
	for _, l := range s.Links() {
		lk := w.open(fSpanLinks)
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		w.bytes(fLinkTraceID, ltid[:])
		w.bytes(fLinkSpanID, lsid[:])
		if ts := l.SpanContext.TraceState(); ts.Len() > 0 {
			w.str(fLinkTraceState, ts.String())
		}
		for _, kv := range l.Attributes {
			w.keyValue(fLinkAttributes, kv)
		}
		w.varint(fLinkDroppedAttrs, clamp32(l.DroppedAttributeCount))
		w.fixed32(fLinkFlags, flags(l.SpanContext.TraceFlags(), l.SpanContext))
		w.close(lk)
	}
	w.varint(fSpanDroppedLinks, clamp32(s.DroppedLinks()))
	// The status is always sent, empty when unset, as the stock exporter
	// does.
	st := s.Status()
	stat := w.open(fSpanStatus)
	w.str(fStatusMessage, st.Description)
	switch st.Code {
	case codes.Ok:
		w.varint(fStatusCode, statusOK)
	case codes.Error:
		w.varint(fStatusCode, statusError)
	}
	w.close(stat)
	w.fixed32(fSpanFlags, flags(sc.TraceFlags(), parent))
	w.close(at)
}

// flags is a span's or link's OTLP flags: the W3C flags, and whether the
// parent (or linked span) is remote.
func flags(tf trace.TraceFlags, other trace.SpanContext) uint32 {
	f := uint32(tf) | flagHasIsRemote
	if other.IsRemote() {
		f |= flagIsRemote
	}
	return f
}

// spanKind maps the API's span kind to OTLP's (the same numbers, 1 to 5;
// anything else is unspecified).
func spanKind(k trace.SpanKind) trace.SpanKind {
	if k < trace.SpanKindInternal || k > trace.SpanKindConsumer {
		return trace.SpanKindUnspecified
	}
	return k
}

// unixNano clamps a time before 1970 to 0, as the stock exporter does.
func unixNano(n int64) uint64 { return uint64(max(0, n)) }

// clamp32 clamps a count to uint32.
func clamp32(v int) uint64 { return uint64(min(max(v, 0), math.MaxUint32)) }

// keyValue writes one KeyValue as field f.
func (w *wire) keyValue(f protowire.Number, kv attribute.KeyValue) {
	at := w.open(f)
	w.str(fKeyValueKey, string(kv.Key))
	w.value(fKeyValueValue, kv.Value)
	w.close(at)
}

// value writes one AnyValue as field f, by the stock exporter's mapping:
// slices become arrays, maps key-value lists, an empty value an empty
// AnyValue, an unknown type the string "INVALID".
func (w *wire) value(f protowire.Number, v attribute.Value) {
	at := w.open(f)
	switch v.Type() {
	case attribute.BOOL:
		w.boolean(fAnyBool, v.AsBool())
	case attribute.INT64:
		w.b = protowire.AppendTag(w.b, fAnyInt, protowire.VarintType)
		w.b = protowire.AppendVarint(w.b, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		w.b = protowire.AppendTag(w.b, fAnyDouble, protowire.Fixed64Type)
		w.b = protowire.AppendFixed64(w.b, math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		w.always(fAnyString, v.AsString())
	case attribute.BYTESLICE:
		w.b = protowire.AppendTag(w.b, fAnyBytes, protowire.BytesType)
		w.b = protowire.AppendBytes(w.b, v.AsByteSlice())
	case attribute.BOOLSLICE:
		a := w.open(fAnyArray)
		for _, x := range v.AsBoolSlice() {
			w.value(fArrayValues, attribute.BoolValue(x))
		}
		w.close(a)
	case attribute.INT64SLICE:
		a := w.open(fAnyArray)
		for _, x := range v.AsInt64Slice() {
			w.value(fArrayValues, attribute.Int64Value(x))
		}
		w.close(a)
	case attribute.FLOAT64SLICE:
		a := w.open(fAnyArray)
		for _, x := range v.AsFloat64Slice() {
			w.value(fArrayValues, attribute.Float64Value(x))
		}
		w.close(a)
	case attribute.STRINGSLICE:
		a := w.open(fAnyArray)
		for _, x := range v.AsStringSlice() {
			w.value(fArrayValues, attribute.StringValue(x))
		}
		w.close(a)
	case attribute.SLICE:
		a := w.open(fAnyArray)
		for _, x := range v.AsSlice() {
			w.value(fArrayValues, x)
		}
		w.close(a)
	case attribute.MAP:
		a := w.open(fAnyKVList)
		for _, kv := range v.AsMap() {
			w.keyValue(fArrayValues, kv)
		}
		w.close(a)
	case attribute.EMPTY:
	default:
		w.always(fAnyString, "INVALID")
	}
	w.close(at)
}

// open starts a length-delimited field f and returns where its body
// starts; close writes the length. One byte is reserved for the length;
// a longer body is moved up once, at close.
func (w *wire) open(f protowire.Number) int {
	w.b = protowire.AppendTag(w.b, f, protowire.BytesType)
	w.b = append(w.b, 0)
	return len(w.b)
}

// close ends the field open returned start for.
func (w *wire) close(start int) {
	n := len(w.b) - start
	if n < 0x80 {
		w.b[start-1] = byte(n)
		return
	}
	size := protowire.SizeVarint(uint64(n))
	w.b = append(w.b, make([]byte, size-1)...)
	copy(w.b[start-1+size:], w.b[start:start+n])
	protowire.AppendVarint(w.b[:start-1], uint64(n))
}

// str writes a string field, omitted when empty (proto3's default).
func (w *wire) str(f protowire.Number, s string) {
	if s != "" {
		w.always(f, s)
	}
}

// always writes a string field even when empty: a oneof's member is sent
// whatever its value.
func (w *wire) always(f protowire.Number, s string) {
	w.b = protowire.AppendTag(w.b, f, protowire.BytesType)
	w.b = protowire.AppendString(w.b, s)
}

// bytes writes a bytes field.
func (w *wire) bytes(f protowire.Number, p []byte) {
	w.b = protowire.AppendTag(w.b, f, protowire.BytesType)
	w.b = protowire.AppendBytes(w.b, p)
}

// varint writes a varint field, omitted when 0.
func (w *wire) varint(f protowire.Number, v uint64) {
	if v != 0 {
		w.b = protowire.AppendTag(w.b, f, protowire.VarintType)
		w.b = protowire.AppendVarint(w.b, v)
	}
}

// boolean writes a oneof's bool, even when false.
func (w *wire) boolean(f protowire.Number, v bool) {
	w.b = protowire.AppendTag(w.b, f, protowire.VarintType)
	w.b = protowire.AppendVarint(w.b, protowire.EncodeBool(v))
}

// fixed64 writes a fixed64 field, omitted when 0.
func (w *wire) fixed64(f protowire.Number, v uint64) {
	if v != 0 {
		w.b = protowire.AppendTag(w.b, f, protowire.Fixed64Type)
		w.b = protowire.AppendFixed64(w.b, v)
	}
}

// fixed32 writes a fixed32 field, omitted when 0.
func (w *wire) fixed32(f protowire.Number, v uint32) {
	if v != 0 {
		w.b = protowire.AppendTag(w.b, f, protowire.Fixed32Type)
		w.b = protowire.AppendFixed32(w.b, v)
	}
}
