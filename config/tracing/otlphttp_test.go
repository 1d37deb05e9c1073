package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// post is one request a recorder was sent, its body un-gzipped.
type post struct {
	path   string
	header http.Header
	body   []byte
}

// recorder is an OTLP/HTTP endpoint on loopback that answers each post
// with the next of its answers (200 once they run out) and keeps it.
type recorder struct {
	srv *httptest.Server

	mu      sync.Mutex
	posts   []post
	answers []func(http.ResponseWriter)
}

func newRecorder(t *testing.T, answers ...func(http.ResponseWriter)) *recorder {
	r := &recorder{answers: answers}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.posts = append(r.posts, post{path: req.URL.Path, header: req.Header.Clone(), body: b})
		var answer func(http.ResponseWriter)
		if len(r.answers) > 0 {
			answer, r.answers = r.answers[0], r.answers[1:]
		}
		r.mu.Unlock()
		if answer != nil {
			answer(w)
		}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// got returns the posts so far.
func (r *recorder) got() []post {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]post(nil), r.posts...)
}

// status answers code with headers kv (name, value, ...).
func status(code int, kv ...string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(kv); i += 2 {
			w.Header().Set(kv[i], kv[i+1])
		}
		w.WriteHeader(code)
	}
}

func oneSpan() []sdktrace.ReadOnlySpan {
	return sampleSpans(resource.NewSchemaless(attribute.String("service.name", "fencepost-sidecar")))[:1]
}

// sansTransport drops the headers that name the sender or depend on how
// the body is framed: the rest must be the stock exporter's.
func sansTransport(h http.Header) http.Header {
	h = h.Clone()
	for _, k := range []string{"User-Agent", "Content-Length", "Transfer-Encoding", "Accept-Encoding"} {
		h.Del(k)
	}
	return h
}

func TestExporterPostsWhatTheStockExporterPostsUnderEachVariable(t *testing.T) {
	rec := newRecorder(t)
	base := rec.srv.URL
	cases := []struct {
		name     string
		endpoint string // tracing.endpoint
		env      map[string]string
		path     string
	}{
		{name: "endpoint setting", endpoint: base, path: "/v1/traces"},
		{name: "endpoint variable is a base URL", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": base + "/base/"},
			path: "/base/v1/traces"},
		{name: "traces endpoint wins, used as it is", endpoint: base,
			env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": base + "/custom/in"}, path: "/custom/in"},
		{name: "traces endpoint without a path is the root",
			env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": base}, path: "/"},
		{name: "headers, percent-decoded, malformed pairs skipped", endpoint: base,
			env:  map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "api-key=a%20b , bad key=x,novalue,x-Team= t1 ,é=1"},
			path: "/v1/traces"},
		{name: "traces headers replace the others", endpoint: base,
			env: map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "a=1", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "b=2"}, path: "/v1/traces"},
		{name: "gzip", endpoint: base, env: map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"}, path: "/v1/traces"},
		{name: "traces compression wins", endpoint: base,
			env:  map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "none"},
			path: "/v1/traces"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			n := len(rec.got())
			// The stock exporter as fencepost built it before it had its own.
			o := []otlptracehttp.Option{otlptracehttp.WithProxy(noProxy)}
			if c.endpoint != "" && c.env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] == "" {
				o = append(o, otlptracehttp.WithEndpointURL(c.endpoint+"/v1/traces"))
			}
			stock, err := otlptracehttp.New(context.Background(), o...)
			require.NoError(t, err)
			require.NoError(t, stock.ExportSpans(context.Background(), oneSpan()))
			require.NoError(t, stock.Shutdown(context.Background()))

			mine, err := newOTLP(Config{Exporter: ExporterOTLP, Endpoint: c.endpoint})
			require.NoError(t, err)
			require.IsType(t, &httpExporter{}, mine, "http/protobuf is fencepost's own exporter")
			require.NoError(t, mine.ExportSpans(context.Background(), oneSpan()))
			require.NoError(t, mine.Shutdown(context.Background()))

			got := rec.got()[n:]
			require.Len(t, got, 2)
			want, have := got[0], got[1]
			require.Equal(t, c.path, want.path, "the case expects what the stock exporter does")
			require.Equal(t, want.path, have.path)
			require.Equal(t, sansTransport(want.header), sansTransport(have.header))
			var wm, hm collectortrace.ExportTraceServiceRequest
			require.NoError(t, proto.Unmarshal(want.body, &wm))
			require.NoError(t, proto.Unmarshal(have.body, &hm))
			require.Empty(t, cmpDiff(&wm, &hm))
		})
	}
}

func TestGRPCAndJSONKeepTheStockExporter(t *testing.T) {
	e, err := newOTLP(Config{Exporter: ExporterOTLP, Protocol: ProtocolGRPC, Endpoint: "http://127.0.0.1:1"})
	require.NoError(t, err)
	require.NotEqual(t, "*tracing.httpExporter", fmt.Sprintf("%T", e))
	require.NoError(t, e.Shutdown(context.Background()))
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")
	e, err = newOTLP(Config{Exporter: ExporterOTLP, Endpoint: "http://127.0.0.1:1"})
	require.NoError(t, err)
	require.NotEqual(t, "*tracing.httpExporter", fmt.Sprintf("%T", e), "only the stock exporter speaks OTLP/JSON")
	require.NoError(t, e.Shutdown(context.Background()))
}

func TestTimeoutAndTLSVariables(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "250")
	e, err := newHTTPExporter("http://127.0.0.1:1/v1/traces")
	require.NoError(t, err)
	require.Equal(t, 250*time.Millisecond, e.client.Timeout)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "1500")
	e, err = newHTTPExporter("")
	require.NoError(t, err)
	require.Equal(t, 1500*time.Millisecond, e.client.Timeout, "the per-signal timeout wins")
	require.Equal(t, "https://localhost:4318/v1/traces", e.url, "the stock exporter's default endpoint")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "soon")
	e, err = newHTTPExporter("")
	require.NoError(t, err)
	require.Equal(t, 250*time.Millisecond, e.client.Timeout, "a timeout that does not parse is ignored")

	t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
	e, err = newHTTPExporter("")
	require.NoError(t, err)
	require.Equal(t, "http://localhost:4318/v1/traces", e.url)
}

// fastRetries makes e's waits instant and records them.
func fastRetries(e *httpExporter) *[]time.Duration {
	var waits []time.Duration
	e.retry.wait = func(_ context.Context, d time.Duration) error {
		waits = append(waits, d)
		return nil
	}
	return &waits
}

func TestRetriesThrottledAndUnavailableAnswersWithBackOff(t *testing.T) {
	rec := newRecorder(t, status(429, "Retry-After", "20"), status(503), status(502), status(504))
	e, err := newHTTPExporter(rec.srv.URL + "/v1/traces")
	require.NoError(t, err)
	waits := fastRetries(e)
	require.NoError(t, e.ExportSpans(context.Background(), oneSpan()))
	got := rec.got()
	require.Len(t, got, 5, "four retryable answers, then success")
	for _, p := range got[1:] {
		require.Equal(t, got[0].body, p.body, "each try sends the same request")
	}
	require.Len(t, *waits, 4)
	require.GreaterOrEqual(t, (*waits)[0], 20*time.Second, "Retry-After is honoured")
	interval := 5 * time.Second
	for _, d := range (*waits)[1:] {
		interval = min(interval*3/2, 30*time.Second)
		require.GreaterOrEqual(t, d, interval/2, "±50 %% of the grown interval")
		require.Less(t, d, interval*3/2)
	}
}

func TestNonRetryableAnswerFailsAtOnce(t *testing.T) {
	rec := newRecorder(t, func(w http.ResponseWriter) { http.Error(w, "no such tenant", http.StatusBadRequest) })
	e, err := newHTTPExporter(rec.srv.URL + "/v1/traces")
	require.NoError(t, err)
	waits := fastRetries(e)
	err = e.ExportSpans(context.Background(), oneSpan())
	require.ErrorContains(t, err, "400 Bad Request")
	require.ErrorContains(t, err, "no such tenant")
	require.Len(t, rec.got(), 1)
	require.Empty(t, *waits)
}

func TestRetryAfterPastTheRetryBudgetGivesUp(t *testing.T) {
	rec := newRecorder(t, status(503, "Retry-After", "120"))
	e, err := newHTTPExporter(rec.srv.URL + "/v1/traces")
	require.NoError(t, err)
	waits := fastRetries(e)
	err = e.ExportSpans(context.Background(), oneSpan())
	require.ErrorContains(t, err, "max retry time would elapse")
	require.Len(t, rec.got(), 1)
	require.Empty(t, *waits)
}

func TestPartialSuccessIsReported(t *testing.T) {
	resp, err := proto.Marshal(&collectortrace.ExportTraceServiceResponse{PartialSuccess: &collectortrace.ExportTracePartialSuccess{
		RejectedSpans: 2, ErrorMessage: "too old"}})
	require.NoError(t, err)
	rec := newRecorder(t, func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", contentTypeProto)
		_, _ = w.Write(resp)
	})
	e, err := newHTTPExporter(rec.srv.URL + "/v1/traces")
	require.NoError(t, err)
	require.ErrorContains(t, e.ExportSpans(context.Background(), oneSpan()), "too old (2 spans rejected)")
}

func TestShutdownEndsARetryingExport(t *testing.T) {
	always503 := make([]func(http.ResponseWriter), 100)
	for i := range always503 {
		always503[i] = status(503)
	}
	rec := newRecorder(t, always503...)
	e, err := newHTTPExporter(rec.srv.URL + "/v1/traces")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- e.ExportSpans(context.Background(), oneSpan()) }()
	require.Eventually(t, func() bool { return len(rec.got()) == 1 }, 10*time.Second, time.Millisecond)
	require.NoError(t, e.Shutdown(context.Background()))
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled, "the back-off wait (5 s) ends with the exporter")
	case <-time.After(3 * time.Second):
		t.Fatal("the export outlived Shutdown")
	}
	require.Error(t, e.ExportSpans(context.Background(), oneSpan()), "a shut exporter sends nothing")
	require.Len(t, rec.got(), 1)
}

func TestGzipBodyIsTheEncodedRequest(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
	rec := newRecorder(t)
	e, err := newHTTPExporter(rec.srv.URL + "/v1/traces")
	require.NoError(t, err)
	for range 2 { // the second export reuses the pooled gzip writer
		require.NoError(t, e.ExportSpans(context.Background(), oneSpan()))
	}
	var w wire
	want := bytes.Clone(w.encode(asData(oneSpan())))
	for _, p := range rec.got() {
		require.Equal(t, "gzip", p.header.Get("Content-Encoding"))
		require.Equal(t, want, p.body)
	}
}
