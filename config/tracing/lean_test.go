package tracing

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// keep is a dataExporter that keeps what a Recorder's spans held when
// exported, as SDK span stubs (the Span itself goes back to the pool).
type keep struct {
	mu   sync.Mutex
	got  []tracetest.SpanStub
	seen int
}

func (k *keep) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	return k.exportData(context.Background(), asData(spans))
}

func (k *keep) exportData(_ context.Context, spans []spanData) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, s := range spans {
		k.seen++
		k.got = append(k.got, tracetest.SpanStub{
			Name: s.Name(), SpanContext: s.SpanContext(), Parent: s.Parent(), SpanKind: s.SpanKind(),
			StartTime: s.StartTime(), EndTime: s.EndTime(), Status: s.Status(),
			Attributes: cloneAttrs(s.Attributes()), Links: append([]sdktrace.Link(nil), s.Links()...),
			Events: append([]sdktrace.Event(nil), s.Events()...), DroppedAttributes: s.DroppedAttributes(),
			DroppedLinks: s.DroppedLinks(), DroppedEvents: s.DroppedEvents(),
			Resource: s.Resource(), InstrumentationScope: s.InstrumentationScope()})
	}
	return nil
}

func (*keep) Shutdown(context.Context) error { return nil }

// cloneAttrs copies kv with its strings: a Recorder's span may make a
// string over its own buffer (SetJoinedString), valid until the span is
// exported and reused, so a keeper must copy what it keeps, as the OTLP
// encoder copies the bytes into its request.
func cloneAttrs(kv []attribute.KeyValue) []attribute.KeyValue {
	out := make([]attribute.KeyValue, 0, len(kv))
	for _, a := range kv {
		if a.Value.Type() == attribute.STRING {
			a.Value = attribute.StringValue(strings.Clone(a.Value.AsString()))
		}
		out = append(out, a)
	}
	return out
}

func (k *keep) spans() []tracetest.SpanStub {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]tracetest.SpanStub(nil), k.got...)
}

// leanPair is a Recorder and an SDK provider with the same resource,
// sampler and (environment-read) limits, each exporting to its own keeper
// through a batcher.
type leanPair struct {
	rec        *Recorder
	tp         *sdktrace.TracerProvider
	lean, sdk  *keep
	leanB, sdB *batcher
}

func newLeanPair(t *testing.T, smp sdktrace.Sampler) *leanPair {
	t.Helper()
	res := resource.NewSchemaless(attribute.String("service.name", "lean-test"))
	p := &leanPair{lean: &keep{}, sdk: &keep{}}
	p.leanB, p.sdB = newBatcher(p.lean, p.lean), newBatcher(p.sdk, p.sdk)
	p.rec = (&Provider{res: res, smp: smp, batch: p.leanB}).Recorder("scope")
	p.tp = sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSampler(smp), sdktrace.WithSpanProcessor(p.sdB))
	t.Cleanup(func() {
		require.NoError(t, p.tp.Shutdown(context.Background()))
		require.NoError(t, p.leanB.Shutdown(context.Background()))
	})
	return p
}

// flush exports what both batchers hold.
func (p *leanPair) flush(t *testing.T) {
	t.Helper()
	require.NoError(t, p.leanB.ForceFlush(context.Background()))
	require.NoError(t, p.sdB.ForceFlush(context.Background()))
}

// op is one call on a span, applied alike to an SDK span and a lean one.
type op func(trace.Span)

// randomOps is a seeded sequence of the calls the request path and its
// neighbours make: attributes (repeated keys, invalid ones, multi-byte
// strings, ints), statuses in every order, links, events and errors.
func randomOps(r *rand.Rand, n int) ([]op, []string) {
	keys := []attribute.Key{"a", "b", "c", "d", "e", "url.full", ""}
	words := []string{"x", "héllo wörld", "日本語のテキスト", strings.Repeat("z", 40), ""}
	var ops []op
	var desc []string
	for range n {
		switch r.IntN(6) {
		case 0, 1:
			k := keys[r.IntN(len(keys))]
			if r.IntN(3) == 0 {
				v := r.Int64N(1000)
				ops = append(ops, func(s trace.Span) { s.SetAttributes(k.Int64(v)) })
				desc = append(desc, fmt.Sprintf("attr %q=%d", k, v))
			} else {
				w := words[r.IntN(len(words))]
				ops = append(ops, func(s trace.Span) { s.SetAttributes(k.String(w)) })
				desc = append(desc, fmt.Sprintf("attr %q=%q", k, w))
			}
		case 2:
			c := []codes.Code{codes.Unset, codes.Error, codes.Ok}[r.IntN(3)]
			d := words[r.IntN(len(words))]
			ops = append(ops, func(s trace.Span) { s.SetStatus(c, d) })
			desc = append(desc, fmt.Sprintf("status %v %q", c, d))
		case 3:
			sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{byte(r.IntN(200) + 1)}, SpanID: trace.SpanID{9}})
			ops = append(ops, func(s trace.Span) { s.AddLink(trace.Link{SpanContext: sc}) })
			desc = append(desc, "link")
		case 4:
			name := words[r.IntN(len(words))]
			ops = append(ops, func(s trace.Span) { s.AddEvent(name, trace.WithAttributes(attribute.String("k", name))) })
			desc = append(desc, fmt.Sprintf("event %q", name))
		case 5:
			ops = append(ops, func(s trace.Span) { s.RecordError(errors.New("boom")) })
			desc = append(desc, "error")
		}
	}
	return ops, desc
}

// comparable is what must match between an SDK span and a lean one made
// by the same calls: everything but ids and times.
func comparable(s tracetest.SpanStub) map[string]any {
	attrs := map[string]string{}
	for _, kv := range s.Attributes {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	var events []string
	for _, e := range s.Events {
		var kv []string
		for _, a := range e.Attributes {
			kv = append(kv, string(a.Key)+"="+a.Value.String())
		}
		sort.Strings(kv)
		events = append(events, e.Name+"{"+strings.Join(kv, ",")+"}")
	}
	var links []string
	for _, l := range s.Links {
		links = append(links, l.SpanContext.TraceID().String())
	}
	return map[string]any{"name": s.Name, "kind": s.SpanKind, "attrs": attrs, "nattrs": len(s.Attributes),
		"dropped": s.DroppedAttributes, "status": s.Status, "events": events, "links": links,
		"droppedLinks": s.DroppedLinks, "droppedEvents": s.DroppedEvents, "parent": s.Parent.SpanID().String(),
		"resource": s.Resource.Equivalent(), "scope": s.InstrumentationScope}
}

// A Recorder's span ends up as the SDK's would after the same calls:
// seeded random call sequences under default and tight limits, compared
// field by field (ids and times aside).
func TestRecorderSpanRecordsWhatTheSDKRecords(t *testing.T) {
	for _, lim := range []map[string]string{
		{},
		{"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "3", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "4", "OTEL_SPAN_LINK_COUNT_LIMIT": "2",
			"OTEL_SPAN_EVENT_COUNT_LIMIT": "1"},
		{"OTEL_ATTRIBUTE_COUNT_LIMIT": "0", "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT": "0"},
	} {
		t.Run(fmt.Sprint(lim), func(t *testing.T) {
			for k, v := range lim {
				t.Setenv(k, v)
			}
			p := newLeanPair(t, sdktrace.AlwaysSample())
			seed := uint64(time.Now().UnixNano())
			r := rand.New(rand.NewPCG(seed, 7))
			parent := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: trace.TraceID{4}, SpanID: trace.SpanID{5}, TraceFlags: trace.FlagsSampled, Remote: true}))
			const runs = 200
			var descs [][]string
			for i := range runs {
				ops, desc := randomOps(r, 1+r.IntN(20))
				descs = append(descs, desc)
				_, sdk := p.tp.Tracer("scope").Start(parent, "span", trace.WithSpanKind(trace.SpanKindClient))
				lean := p.rec.Start(parent, "span", trace.SpanKindClient)
				for _, o := range ops {
					o(sdk)
					o(lean)
				}
				sdk.End()
				lean.End()
				_ = i
			}
			p.flush(t)
			got, want := p.lean.spans(), p.sdk.spans()
			require.Len(t, got, runs)
			require.Len(t, want, runs)
			for i := range runs {
				require.Equal(t, comparable(want[i]), comparable(got[i]), "seed %d, run %d: %v", seed, i, descs[i])
				require.Equal(t, want[i].SpanContext.TraceID(), got[i].SpanContext.TraceID(), "the parent's trace continues")
				require.True(t, got[i].SpanContext.SpanID().IsValid())
				require.False(t, got[i].EndTime.Before(got[i].StartTime))
			}
		})
	}
}

// The provider's sampler decides for a Recorder as for the SDK: a
// dropped span still gets ids (for the traceparent sent on) but is not
// exported; a sampled parent is followed.
func TestRecorderFollowsTheSampler(t *testing.T) {
	p := newLeanPair(t, sdktrace.ParentBased(sdktrace.NeverSample()))
	root := p.rec.Start(context.Background(), "root", trace.SpanKindClient)
	require.True(t, root.SpanContext().IsValid())
	require.False(t, root.SpanContext().IsSampled())
	require.False(t, root.IsRecording())
	root.End()
	parent := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled, Remote: true}))
	child := p.rec.Start(parent, "child", trace.SpanKindClient)
	require.True(t, child.SpanContext().IsSampled())
	require.Equal(t, trace.TraceID{1}, child.SpanContext().TraceID())
	child.End()
	p.flush(t)
	got := p.lean.spans()
	require.Len(t, got, 1)
	require.Equal(t, "child", got[0].Name)
	require.Equal(t, trace.SpanID{2}, got[0].Parent.SpanID())
	require.Equal(t, instrumentation.Scope{Name: "scope"}, got[0].InstrumentationScope)
}

// Spans go back to the pool after export and are handed out again: what
// one request recorded never shows in another's span, under concurrent
// requests and batches exported while others record.
func TestRecorderPoolNeverMixesSpans(t *testing.T) {
	t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "7")
	p := newLeanPair(t, sdktrace.AlwaysSample())
	const workers, each = 4, 500
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := fmt.Sprintf("%d-%d", w, i)
				s := p.rec.Start(context.Background(), id, trace.SpanKindClient)
				s.SetAttributes(attribute.String("id", id))
				s.SetJoinedString("url.full", "http://", []byte(id))
				if i%5 == 0 { // past the span's text buffer: a new array
					s.SetJoinedString("long", strings.Repeat("L", 300), []byte(id))
				}
				if i%3 == 0 {
					s.SetAttributes(attribute.String("third", id))
					s.SetStatus(codes.Error, id)
				}
				s.End()
			}
		}()
	}
	wg.Wait()
	p.flush(t)
	got := p.lean.spans()
	require.Len(t, got, workers*each)
	for _, s := range got {
		want := []attribute.KeyValue{attribute.String("id", s.Name), attribute.String("url.full", "http://"+s.Name)}
		n := s.Name[strings.IndexByte(s.Name, '-')+1:]
		if atoi(n)%5 == 0 {
			want = append(want, attribute.String("long", strings.Repeat("L", 300)+s.Name))
		}
		if atoi(n)%3 == 0 {
			want = append(want, attribute.String("third", s.Name))
			require.Equal(t, sdktrace.Status{Code: codes.Error, Description: s.Name}, s.Status)
		} else {
			require.Equal(t, sdktrace.Status{}, s.Status, s.Name)
		}
		require.Equal(t, want, s.Attributes, s.Name)
	}
}

// A string SetJoinedString made stays what it was when the span's buffer
// grows for a later one, the caller's bytes are copied rather than kept,
// and the export carries every joined attribute.
func TestJoinedStringsSurviveTheBufferGrowing(t *testing.T) {
	p := newLeanPair(t, sdktrace.AlwaysSample())
	s := p.rec.Start(context.Background(), "GET", trace.SpanKindClient)
	want := map[attribute.Key]string{}
	for i := range 40 {
		k := attribute.Key(fmt.Sprintf("k%d", i))
		rest := []byte(strings.Repeat(string(rune('a'+i%26)), 10*i))
		s.SetJoinedString(k, "p:", rest)
		want[k] = "p:" + string(rest)
		if len(rest) > 0 {
			rest[0] = '!' // the caller's bytes are copied, not kept
		}
	}
	s.SetJoinedString("empty", "only-prefix", nil)
	want["empty"] = "only-prefix"
	for _, a := range s.Attributes() {
		require.Equal(t, want[a.Key], a.Value.AsString(), a.Key)
	}
	require.Len(t, s.Attributes(), len(want))
	s.End()
	p.flush(t)
	got := p.lean.spans()
	require.Len(t, got, 1)
	require.Len(t, got[0].Attributes, len(want))
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// A span the queue cannot take, or one ended after shutdown, is dropped
// and its Span still goes back to the pool (End does not hold it).
func TestRecorderSpanPastShutdownIsDropped(t *testing.T) {
	p := newLeanPair(t, sdktrace.AlwaysSample())
	require.NoError(t, p.leanB.Shutdown(context.Background()))
	s := p.rec.Start(context.Background(), "late", trace.SpanKindClient)
	s.End()
	s.End() // a second End does nothing
	require.Empty(t, p.lean.spans())
}

// Only fencepost's OTLP/HTTP exporter takes a Recorder's spans: the
// console and the stock gRPC and OTLP/JSON exporters get none.
func TestRecorderOnlyOverTheOwnExporter(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		json bool
		want bool
	}{
		{cfg: Config{Exporter: ExporterOTLP, Endpoint: "http://127.0.0.1:1"}, want: true},
		{cfg: Config{Exporter: ExporterOTLP, Endpoint: "http://127.0.0.1:1"}, json: true},
		{cfg: Config{Exporter: ExporterOTLP, Protocol: ProtocolGRPC, Endpoint: "http://127.0.0.1:1"}},
		{cfg: Config{Exporter: ExporterConsole}},
	} {
		if c.json {
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
		}
		s, err := New(c.cfg, Options{Console: &strings.Builder{}})
		require.NoError(t, err)
		rec := s.Provider("sidecar").(*Provider).Recorder("x")
		require.Equal(t, c.want, rec != nil, "%+v json=%v", c.cfg, c.json)
		require.NoError(t, s.Shutdown(context.Background()))
	}
}
