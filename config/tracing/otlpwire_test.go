package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

// sampleSpans covers every field and attribute type the encoder writes:
// two scopes under one resource, a remote parent, trace state, events,
// links, each status, dropped counts, and a body long enough to need
// multi-byte lengths.
func sampleSpans(res *resource.Resource) []sdktrace.ReadOnlySpan {
	tid := trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	ts, _ := trace.ParseTraceState("vendor=1,other=x")
	sc := func(sid byte, remote bool) trace.SpanContext {
		return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{sid, 1}, TraceFlags: trace.FlagsSampled,
			TraceState: ts, Remote: remote})
	}
	start := time.Unix(1_700_000_000, 123456789)
	long := make([]byte, 300)
	for i := range long {
		long[i] = 'a' + byte(i%26)
	}
	all := []attribute.KeyValue{
		attribute.String("s", "v"), attribute.String("empty", ""), attribute.Bool("f", false), attribute.Bool("t", true),
		attribute.Int64("zero", 0), attribute.Int64("neg", -7), attribute.Float64("pi", 3.14), attribute.Float64("fz", 0),
		attribute.BoolSlice("bs", []bool{true, false}), attribute.Int64Slice("is", []int64{1, -2}),
		attribute.Float64Slice("fs", []float64{0.5}), attribute.StringSlice("ss", []string{"a", ""}),
		attribute.String("long", string(long)),
	}
	scope := instrumentation.Scope{Name: "github.com/fencepost/fencepost/proxy", Version: "1.0", SchemaURL: "https://x/s",
		Attributes: attribute.NewSet(attribute.String("scope.k", "v"))}
	stubs := tracetest.SpanStubs{
		{Name: "POST", SpanContext: sc(1, false), Parent: sc(9, true), SpanKind: trace.SpanKindClient,
			StartTime: start, EndTime: start.Add(time.Millisecond), Attributes: all, DroppedAttributes: 2,
			Events: []sdktrace.Event{{Name: "ev", Time: start, Attributes: all[:3], DroppedAttributeCount: 1}}, DroppedEvents: 3,
			Links:  []sdktrace.Link{{SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{7}}), Attributes: all[:2], DroppedAttributeCount: 4}},
			Status: sdktrace.Status{Code: codes.Error, Description: "blocked: revoked"}, Resource: res, InstrumentationScope: scope},
		{Name: "lease lost", SpanContext: sc(2, false), SpanKind: trace.SpanKindInternal, StartTime: start, EndTime: start,
			Status: sdktrace.Status{Code: codes.Ok}, Resource: res, InstrumentationScope: instrumentation.Scope{Name: "other"}},
		{Name: "GET", SpanContext: sc(3, false), Parent: sc(1, false), SpanKind: trace.SpanKindServer, StartTime: start,
			EndTime: start.Add(time.Second), Resource: res, InstrumentationScope: scope},
	}
	return stubs.Snapshots()
}

// capture serves one OTLP/HTTP endpoint on loopback and keeps each
// request body it is posted.
func capture(t *testing.T) (*httptest.Server, func() [][]byte) {
	var mu sync.Mutex
	var bodies [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
		w.Header().Set("Content-Type", contentTypeProto)
	}))
	t.Cleanup(srv.Close)
	return srv, func() [][]byte {
		mu.Lock()
		defer mu.Unlock()
		return append([][]byte(nil), bodies...)
	}
}

func TestWireMatchesTheStockExporter(t *testing.T) {
	res := resource.NewSchemaless(attribute.String("service.name", "fencepost-sidecar"), attribute.Int64("n", 3))
	spans := sampleSpans(res)

	srv, bodies := capture(t)
	stock, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(srv.URL+"/v1/traces"))
	require.NoError(t, err)
	require.NoError(t, stock.ExportSpans(context.Background(), spans))
	require.NoError(t, stock.Shutdown(context.Background()))
	got := bodies()
	require.Len(t, got, 1)
	var want collectortrace.ExportTraceServiceRequest
	require.NoError(t, proto.Unmarshal(got[0], &want))

	var w wire
	for range 2 { // a reused encoder writes the same bytes again
		var mine collectortrace.ExportTraceServiceRequest
		require.NoError(t, proto.Unmarshal(w.encode(asData(spans)), &mine))
		require.Empty(t, cmpDiff(&want, &mine))
	}
	// A request span as the sidecar makes one: strings and ints, no
	// trace state (TraceState.String and the typed slices' As* copy).
	plain := tracetest.SpanStubs{{Name: "POST", Resource: res, SpanKind: trace.SpanKindClient,
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}}),
		Attributes:  []attribute.KeyValue{attribute.String("url.full", "http://x/y"), attribute.Int("server.port", 80)},
		Status:      sdktrace.Status{Code: codes.Error, Description: "blocked"}}}.Snapshots()
	data := asData(plain)
	w.encode(data)
	require.Zero(t, testing.AllocsPerRun(20, func() { w.encode(data) }), "a warm encoder allocates nothing")
}

func TestWireGroupsSpansByResourceAndKeepsLinkTraceState(t *testing.T) {
	a := resource.NewSchemaless(attribute.String("service.name", "a"))
	b := resource.NewSchemaless(attribute.String("service.name", "b"))
	ts, _ := trace.ParseTraceState("k=v")
	link := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceState: ts})
	stubs := tracetest.SpanStubs{
		{Name: "a1", Resource: a, Links: []sdktrace.Link{{SpanContext: link}}},
		{Name: "b1", Resource: b},
		{Name: "a2", Resource: a},
	}
	var w wire
	var msg collectortrace.ExportTraceServiceRequest
	require.NoError(t, proto.Unmarshal(w.encode(asData(stubs.Snapshots())), &msg))
	rs := msg.GetResourceSpans()
	require.Len(t, rs, 2)
	names := func(i int) (out []string) {
		for _, ss := range rs[i].GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				out = append(out, s.GetName())
			}
		}
		return out
	}
	require.Equal(t, []string{"a1", "a2"}, names(0))
	require.Equal(t, []string{"b1"}, names(1))
	require.Equal(t, "b", rs[1].GetResource().GetAttributes()[0].GetValue().GetStringValue())
	require.Equal(t, "k=v", rs[0].GetScopeSpans()[0].GetSpans()[0].GetLinks()[0].GetTraceState())
}

// cmpDiff compares two protobuf messages field by field.
func cmpDiff(want, got proto.Message) string {
	if proto.Equal(want, got) {
		return ""
	}
	return "messages differ:\nwant " + prototext.Format(want) + "\ngot  " + prototext.Format(got)
}
