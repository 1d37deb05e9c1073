// Package otlprecv is an OTLP trace receiver for tests: it listens on
// 127.0.0.1:0, decodes the real OTLP protobuf (over HTTP, and over gRPC when
// asked), and keeps every span it was sent, flattened for assertions.
//
// It accepts spans from anyone who can reach the loopback port; it is a test
// fixture, never part of the fencepost binary.
package otlprecv

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is one received span with ids in lower-case hex and attributes as
// text.
type Span struct {
	// Service is the resource's service.name; Resource every resource
	// attribute.
	Service  string
	Resource map[string]string
	// TraceID, SpanID and ParentID are hex; ParentID is "" for a root.
	TraceID, SpanID, ParentID string
	// Name is the span name.
	Name string
	// Kind is the OTLP span kind.
	Kind tracepb.Span_SpanKind
	// Attrs holds every attribute, its value formatted as text.
	Attrs map[string]string
	// Status is the status code; StatusMessage its description.
	Status        tracepb.Status_StatusCode
	StatusMessage string
	// Events are the event names in order; EventAttrs their attributes.
	Events     []string
	EventAttrs []map[string]string
	// Links are the span ids the span links to, in order.
	Links []string
}

// Receiver collects spans.
type Receiver struct {
	t    testing.TB
	http *http.Server
	addr string
	grpc *grpc.Server
	gadr string

	count bool // only count posts (StartCounting)

	mu    sync.Mutex
	spans []Span
	posts int
}

// Start serves OTLP/HTTP on 127.0.0.1:0 until the test ends.
func Start(t testing.TB) *Receiver { return start(t, false) }

// StartCounting serves OTLP/HTTP but only reads and counts the export
// requests, for benchmarks: decoding every span in the benchmark's own
// process would bill a collector's work to the code under test.
func StartCounting(t testing.TB) *Receiver { return start(t, true) }

// start serves OTLP/HTTP; count skips decoding.
func start(t testing.TB, count bool) *Receiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r := &Receiver{t: t, addr: ln.Addr().String(), count: count}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.serveHTTP)
	r.http = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = r.http.Serve(ln) }()
	t.Cleanup(func() { _ = r.http.Close() })
	return r
}

// StartGRPC also serves OTLP/gRPC on another 127.0.0.1:0 port.
func (r *Receiver) StartGRPC() {
	r.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(r.t, err)
	r.gadr = ln.Addr().String()
	r.grpc = grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(r.grpc, grpcService{r: r})
	go func() { _ = r.grpc.Serve(ln) }()
	r.t.Cleanup(r.grpc.Stop)
}

// URL is the OTLP/HTTP base URL, as OTEL_EXPORTER_OTLP_ENDPOINT takes it.
func (r *Receiver) URL() string { return "http://" + r.addr }

// GRPCURL is the OTLP/gRPC endpoint URL (after StartGRPC).
func (r *Receiver) GRPCURL() string { return "http://" + r.gadr }

// serveHTTP decodes one ExportTraceServiceRequest.
func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	if r.count {
		// Read through io.Discard's pooled buffer: a counting receiver
		// stands in for a collector in benchmarks, and its reading must
		// bill the process as little as a collector elsewhere would.
		if _, err := io.Copy(io.Discard, body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.posts++
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		return
	}
	data, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.add(&msg)
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// grpcService is the gRPC face of the receiver.
type grpcService struct {
	collectortrace.UnimplementedTraceServiceServer
	r *Receiver
}

// Export records the spans.
func (g grpcService) Export(_ context.Context, msg *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	g.r.add(msg)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// add flattens msg's spans.
func (r *Receiver) add(msg *collectortrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.posts++
	for _, rs := range msg.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{Service: res["service.name"], Resource: res, TraceID: hex.EncodeToString(s.GetTraceId()),
					SpanID: hex.EncodeToString(s.GetSpanId()), ParentID: hex.EncodeToString(s.GetParentSpanId()),
					Name: s.GetName(), Kind: s.GetKind(), Attrs: attrs(s.GetAttributes()),
					Status: s.GetStatus().GetCode(), StatusMessage: s.GetStatus().GetMessage()}
				for _, e := range s.GetEvents() {
					sp.Events = append(sp.Events, e.GetName())
					sp.EventAttrs = append(sp.EventAttrs, attrs(e.GetAttributes()))
				}
				for _, l := range s.GetLinks() {
					sp.Links = append(sp.Links, hex.EncodeToString(l.GetSpanId()))
				}
				r.spans = append(r.spans, sp)
			}
		}
	}
}

// attrs formats key-values as text.
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.GetKey()] = x.StringValue
		case *commonpb.AnyValue_IntValue:
			out[kv.GetKey()] = fmt.Sprint(x.IntValue)
		case *commonpb.AnyValue_BoolValue:
			out[kv.GetKey()] = fmt.Sprint(x.BoolValue)
		case *commonpb.AnyValue_DoubleValue:
			out[kv.GetKey()] = fmt.Sprint(x.DoubleValue)
		default:
			out[kv.GetKey()] = v.String()
		}
	}
	return out
}

// Spans returns a copy of every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// Posts counts the export requests received.
func (r *Receiver) Posts() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.posts
}

// WaitFor polls until a span satisfying match arrives (or the deadline
// passes and the test fails) and returns it.
func (r *Receiver) WaitFor(what string, match func(Span) bool) Span {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, s := range r.Spans() {
			if match(s) {
				return s
			}
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("otlprecv: no span %s within 10s; got %s", what, Summary(r.Spans()))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Named matches a span by name.
func Named(name string) func(Span) bool { return func(s Span) bool { return s.Name == name } }

// Summary renders spans one per line, for failure messages.
func Summary(spans []Span) string {
	out := ""
	for _, s := range spans {
		out += fmt.Sprintf("\n  %s %q trace=%s span=%s parent=%s status=%v attrs=%v events=%v",
			s.Service, s.Name, s.TraceID, s.SpanID, s.ParentID, s.Status, s.Attrs, s.Events)
	}
	return out
}
