package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/fencepost/fencepost/config"
	"github.com/fencepost/fencepost/config/tracing"
	"github.com/fencepost/fencepost/fence/fenceotel"
	"github.com/fencepost/fencepost/test/otlprecv"
)

// devBanner is what the trace test reads from fencepost dev's banner.
type devBanner struct {
	proxy, httpURL, httpsURL, bundle, console string
	revoke                                    []string
}

var (
	bannerProxy   = regexp.MustCompile(`sidecar proxy +http://(\S+)`)
	bannerFenced  = regexp.MustCompile(`fenced service +(https?://\S+)`)
	bannerRevoke  = regexp.MustCompile(`(?m)^ +\S+ (ctl .* tasks revoke \S+)$`)
	bannerConsole = regexp.MustCompile(`console +(https?://\S+)`)
)

// startTracedDev runs fencepost dev in-process on free ports, exporting
// OTLP to recv, and returns its banner and a stop that flushes every span.
func startTracedDev(t *testing.T, recv *otlprecv.Receiver, log *zap.Logger) (devBanner, func()) {
	t.Helper()
	cfg := config.DefaultDev()
	cfg.DataDir, cfg.Ports = filepath.Join(t.TempDir(), "data"), config.DevPorts{}
	cfg.Tracing.Exporter, cfg.Tracing.Endpoint = tracing.ExporterOTLP, recv.URL()
	ctx, cancel := context.WithCancel(t.Context())
	var out lockedBuffer
	done := make(chan error, 1)
	go func() { done <- serveDev(ctx, cfg, log, &out) }()
	var b devBanner
	deadline := time.Now().Add(60 * time.Second)
	for {
		text := out.String()
		if m := bannerRevoke.FindStringSubmatch(text); m != nil && strings.Contains(text, "https://") {
			b.proxy = bannerProxy.FindStringSubmatch(text)[1]
			for _, f := range bannerFenced.FindAllStringSubmatch(text, -1) {
				if strings.HasPrefix(f[1], "https://") {
					b.httpsURL = f[1]
				} else {
					b.httpURL = f[1]
				}
			}
			b.revoke = strings.Fields(m[1])
			if c := bannerConsole.FindStringSubmatch(text); c != nil {
				b.console = c[1]
			}
			b.bundle = filepath.Join(cfg.DataDir, "ca-bundle.pem")
			break
		}
		require.True(t, time.Now().Before(deadline), "no banner from dev:\n%s", text)
		time.Sleep(20 * time.Millisecond)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		require.NoError(t, <-done)
	}
	t.Cleanup(stop)
	return b, stop
}

// worker is the test's worker: its own tracer (service "worker") and an
// HTTP client whose proxy is the sidecar, trusting the sidecar's CA.
type worker struct {
	tp     trace.TracerProvider
	setup  *tracing.Setup
	client *http.Client
}

func newWorker(t *testing.T, recv *otlprecv.Receiver, proxy, bundle string) *worker {
	t.Helper()
	setup, err := tracing.New(tracing.Config{Exporter: tracing.ExporterOTLP, Endpoint: recv.URL(), ServiceName: "worker"}, tracing.Options{})
	require.NoError(t, err)
	pem, err := os.ReadFile(bundle)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(pem))
	pu, err := url.Parse("http://" + proxy)
	require.NoError(t, err)
	tr := &http.Transport{Proxy: http.ProxyURL(pu), TLSClientConfig: &tls.Config{RootCAs: roots}}
	t.Cleanup(tr.CloseIdleConnections)
	return &worker{tp: setup.Provider("worker"), setup: setup, client: &http.Client{Transport: tr}}
}

// call makes one tool call under a client span and returns the span's
// trace id and the status.
func (w *worker) call(t *testing.T, name, target, body string) (trace.SpanContext, int) {
	t.Helper()
	ctx, span := w.tp.Tracer("worker").Start(context.Background(), name, trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, strings.NewReader(body))
	require.NoError(t, err)
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := w.client.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return span.SpanContext(), resp.StatusCode
}

// callThroughConnect makes one tool call as Node's fetch does for an
// http:// URL: a CONNECT to the host, then the plain request inside the
// tunnel.
func (w *worker) callThroughConnect(t *testing.T, proxy, target, body string) (trace.SpanContext, int) {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	ctx, span := w.tp.Tracer("worker").Start(context.Background(), "tool call via CONNECT", trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	c, err := net.DialTimeout("tcp", proxy, 5*time.Second)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", u.Host, u.Host)
	require.NoError(t, err)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, strings.NewReader(body))
	require.NoError(t, err)
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	require.NoError(t, req.Write(c))
	resp, err = http.ReadResponse(br, req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return span.SpanContext(), resp.StatusCode
}

// inTrace returns the spans of one trace by service.
func inTrace(spans []otlprecv.Span, traceID string) map[string][]otlprecv.Span {
	out := map[string][]otlprecv.Span{}
	for _, s := range spans {
		if s.TraceID == traceID {
			out[s.Service] = append(out[s.Service], s)
		}
	}
	return out
}

// One worker call through a real sidecar to the fenced service is one
// trace: worker -> sidecar -> fenced, parent-child links right, the epoch
// on the sidecar's and the fenced service's span; a CONNECT-carried
// plain request and intercepted HTTPS are traced the same way; after a revoke the write is a blocked error span
// and the fenced service sees nothing.
func TestOneTraceFromWorkerThroughSidecarToFenced(t *testing.T) {
	recv := otlprecv.Start(t)
	core, logs := observer.New(zap.InfoLevel)
	b, stop := startTracedDev(t, recv, zap.New(core))
	w := newWorker(t, recv, b.proxy, b.bundle)

	plain, status := w.call(t, "tool call http", b.httpURL+"/v1/tasks/dev-task/writes", "step 1")
	require.Equal(t, http.StatusCreated, status)
	tlsCall, status := w.call(t, "tool call https", b.httpsURL+"/v1/tasks/dev-task/writes", "step 2")
	require.Equal(t, http.StatusCreated, status)
	tunnelled, status := w.callThroughConnect(t, b.proxy, b.httpURL+"/v1/tasks/dev-task/writes", "step 2b")
	require.Equal(t, http.StatusCreated, status)

	var out, errOut strings.Builder
	require.Equal(t, exitOK, run(t.Context(), b.revoke, &out, &errOut), errOut.String())
	// The sidecar learns of the revocation from the cluster; poll until a
	// write is refused (each attempt is its own trace).
	var blocked trace.SpanContext
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, status := w.call(t, "tool call after revoke", b.httpURL+"/v1/tasks/dev-task/writes", "step 3")
		if status == http.StatusConflict {
			// The first refusal can race the revocation's own span: the
			// keeper drops the lease, then records the event, so a write
			// landing between them links to the event before. One more
			// call after a refusal is past that window.
			blocked, status = w.call(t, "tool call after revoke", b.httpURL+"/v1/tasks/dev-task/writes", "step 4")
			require.Equal(t, http.StatusConflict, status)
			break
		}
		require.True(t, time.Now().Before(deadline), "writes still pass after the revoke (status %d)", status)
		time.Sleep(50 * time.Millisecond)
	}

	// The sidecar reports the blocks to the cluster: the console's
	// timeline of the task shows them with the worker's trace id.
	require.NotEmpty(t, b.console, "no console URL in dev's banner")
	page := strings.TrimSuffix(b.console, "/") + "/tasks/dev-task?fragment=1"
	var body string
	deadline = time.Now().Add(20 * time.Second)
	for !strings.Contains(body, "trace "+blocked.TraceID().String()) {
		require.True(t, time.Now().Before(deadline), "the console's timeline never showed the blocked write:\n%s", body)
		time.Sleep(50 * time.Millisecond)
		resp, err := http.Get(page)
		require.NoError(t, err)
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
		body = string(raw)
	}
	require.Contains(t, body, "<strong>blocked by the sidecar</strong>")
	require.Regexp(t, `calls?(, the first)? POST \S+:\d+/v1/tasks/dev-task/writes — revoked \[`, body)

	stop() // flushes the sidecar's, the cluster's and fenced's spans
	require.NoError(t, w.setup.Shutdown(context.Background()))
	spans := recv.Spans()

	for _, c := range []struct {
		sc    trace.SpanContext
		entry string
	}{{plain, "proxy"}, {tlsCall, "intercepted"}, {tunnelled, "connect"}} {
		tr := inTrace(spans, c.sc.TraceID().String())
		require.Len(t, tr["worker"], 1, otlprecv.Summary(spans))
		require.Len(t, tr["fencepost-sidecar"], 1, "%s: %s", c.entry, otlprecv.Summary(spans))
		require.Len(t, tr["fencepost-fenced"], 1, "%s: %s", c.entry, otlprecv.Summary(spans))
		wk, sc, fd := tr["worker"][0], tr["fencepost-sidecar"][0], tr["fencepost-fenced"][0]
		require.Equal(t, wk.SpanID, sc.ParentID, "the sidecar continues the worker's span")
		require.Equal(t, sc.SpanID, fd.ParentID, "the fenced service's parent is the sidecar's span")
		require.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, sc.Kind)
		require.Equal(t, tracepb.Span_SPAN_KIND_SERVER, fd.Kind)
		epoch := sc.Attrs[string(fenceotel.Epoch)]
		require.NotEmpty(t, epoch)
		require.Equal(t, epoch, fd.Attrs[string(fenceotel.Epoch)], "the same epoch on every hop")
		require.Equal(t, "dev-task", sc.Attrs[string(fenceotel.TaskID)])
		require.Equal(t, "dev-task", fd.Attrs[string(fenceotel.TaskID)])
		require.Equal(t, fenceotel.DecisionForwarded, sc.Attrs[string(fenceotel.Decision)])
		require.Equal(t, c.entry, sc.Attrs["fencepost.proxy.entry"])
		require.Equal(t, fenceotel.VerdictAccepted, fd.Attrs[string(fenceotel.Verdict)])
		require.NotEmpty(t, sc.Attrs[string(fenceotel.IdempotencyKey)])
		require.Equal(t, sc.Attrs[string(fenceotel.IdempotencyKey)], fd.Attrs[string(fenceotel.IdempotencyKey)])
		require.Equal(t, "201", sc.Attrs["http.response.status_code"])
	}

	tr := inTrace(spans, blocked.TraceID().String())
	require.Len(t, tr["fencepost-sidecar"], 1, otlprecv.Summary(spans))
	require.Empty(t, tr["fencepost-fenced"], "a blocked write never reaches the service")
	bs := tr["fencepost-sidecar"][0]
	require.Equal(t, tracepb.Status_STATUS_CODE_ERROR, bs.Status)
	require.Equal(t, fenceotel.DecisionBlocked, bs.Attrs[string(fenceotel.Decision)])
	require.NotEmpty(t, bs.Attrs[string(fenceotel.BlockReason)])
	require.Equal(t, "409", bs.Attrs["http.response.status_code"])
	// The sidecar's log line for the block names the trace and the span.
	var logged bool
	for _, e := range logs.FilterMessage("request blocked").All() {
		f := e.ContextMap()
		if f[fenceotel.LogTraceID] == bs.TraceID {
			require.Equal(t, bs.SpanID, f[fenceotel.LogSpanID])
			logged = true
		}
	}
	require.True(t, logged, "no \"request blocked\" line carries the blocked span's trace id")

	// The lease's life is in the trace store too, and the blocked write
	// links to the revocation that blocked it.
	events := map[string]string{}
	for _, s := range spans {
		if s.Service == "fencepost-sidecar" && strings.HasPrefix(s.Name, "lease ") {
			events[s.Name] = s.SpanID
			require.Equal(t, "dev-task", s.Attrs[string(fenceotel.TaskID)])
		}
	}
	require.Contains(t, events, "lease acquired")

	// The sidecar's own cluster calls are traced too: its acquire is a
	// client span whose child is the cluster's server span.
	var acquire *otlprecv.Span
	for i, s := range spans {
		if s.Service == "fencepost-sidecar" && s.Name == "POST /v1/tasks/{id}/acquire" {
			acquire = &spans[i]
		}
	}
	require.NotNil(t, acquire, "no span of the sidecar's acquire: %s", otlprecv.Summary(spans))
	require.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, acquire.Kind)
	var served bool
	for _, s := range inTrace(spans, acquire.TraceID)["fencepost-server"] {
		if s.ParentID == acquire.SpanID && s.Kind == tracepb.Span_SPAN_KIND_SERVER {
			served = true
			require.Equal(t, "dev-task", s.Attrs[string(fenceotel.TaskID)])
		}
	}
	require.True(t, served, "the cluster's span of the acquire is not the sidecar's span's child: %s", otlprecv.Summary(spans))
	require.Contains(t, events, "lease revoked", "events: %v", events)
	require.Equal(t, []string{events["lease revoked"]}, bs.Links)
	require.Equal(t, "dev-task", bs.Attrs[string(fenceotel.TaskID)])
}
