package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// httpExporter is fencepost's OTLP/HTTP protobuf span exporter. It encodes
// each batch with wire (no intermediate proto structs) into a reused
// buffer and posts it with the stock otlptracehttp exporter's semantics:
// the same OTEL_EXPORTER_OTLP_[TRACES_]* variables (readHTTPSettings), the
// same retries (429, 502, 503, 504 and temporary network errors,
// exponential back-off from 5 s to 30 s within one minute, Retry-After
// honoured), the same size limits and handling of a partial success. The
// OTLP/JSON protocol, which fencepost's settings do not offer but
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL could name, is left to the stock
// exporter (newOTLP).
type httpExporter struct {
	httpSettings
	client *http.Client
	retry  backoff

	// encoders holds warm encoders: each export takes one, so exports of
	// several providers may run at once (as the stock exporter's do) and
	// none grows its buffers again. Not a sync.Pool: that empties at
	// every other GC, which under load is every few batches, and a batch
	// of 512 spans regrows a quarter-megabyte buffer each time.
	encoders chan *encoder

	stopped context.Context // canceled by Shutdown: in-flight posts end
	stop    context.CancelFunc
}

// encoder is the reusable state of one export.
type encoder struct {
	w   wire
	gzb bytes.Buffer
	gz  *gzip.Writer
}

// backoff is a retry schedule: the first interval, its cap and the time
// after which an export gives up. wait sleeps (tests pass their own).
type backoff struct {
	initial, max, maxElapsed time.Duration
	wait                     func(context.Context, time.Duration) error
}

// stockBackoff is the stock exporter's schedule.
var stockBackoff = backoff{initial: 5 * time.Second, max: 30 * time.Second, maxElapsed: time.Minute, wait: sleep}

// Content types of OTLP/HTTP bodies.
const (
	contentTypeProto = "application/x-protobuf"
	contentTypeJSON  = "application/json"
)

// userAgent names the exporter to collectors.
const userAgent = "fencepost OTLP exporter"

// newHTTPExporter builds the exporter from the variables and endpoint (a
// full URL; empty leaves the variables in charge).
func newHTTPExporter(endpoint string) (*httpExporter, error) {
	s, err := readHTTPSettings(endpoint)
	if err != nil {
		return nil, err
	}
	e := &httpExporter{httpSettings: s, client: s.client(), retry: stockBackoff}
	e.encoders = make(chan *encoder, maxEncoders)
	e.stopped, e.stop = context.WithCancel(context.Background())
	return e, nil
}

// ExportSpans posts spans as one export request, retrying as the stock
// exporter does.
func (e *httpExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	return e.exportData(ctx, asData(spans))
}

// asData is spans as the encoder reads them.
func asData(spans []sdktrace.ReadOnlySpan) []spanData {
	out := make([]spanData, len(spans))
	for i, s := range spans {
		if s != nil {
			out[i] = s
		}
	}
	return out
}

// exportData is ExportSpans for spans the batcher queued, SDK spans and a
// Recorder's alike, without converting them.
func (e *httpExporter) exportData(ctx context.Context, spans []spanData) error {
	if len(spans) == 0 {
		return nil
	}
	enc := e.encoder()
	defer e.release(enc)
	body, err := enc.body(spans, e.gzip)
	if err != nil {
		return fmt.Errorf("traces export: %w", err)
	}
	if body == nil {
		return nil // only nil spans
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(e.stopped, cancel)()
	if err := e.retry.run(ctx, func() error { return e.post(ctx, body) }); err != nil {
		return fmt.Errorf("traces export: %w", err)
	}
	return nil
}

// maxEncoders bounds the warm encoders kept: one per provider of a
// process (fencepost dev has three) is plenty.
const maxEncoders = 4

// encoder takes a warm encoder, or a new one when all are in use.
func (e *httpExporter) encoder() *encoder {
	select {
	case enc := <-e.encoders:
		return enc
	default:
		return new(encoder)
	}
}

// release keeps enc for the next export, unless enough are kept.
func (e *httpExporter) release(enc *encoder) {
	enc.w.forget()
	select {
	case e.encoders <- enc:
	default:
	}
}

// body encodes spans, gzipped when asked; nil when there is no span.
func (enc *encoder) body(spans []spanData, gz bool) ([]byte, error) {
	body := enc.w.encode(spans)
	if len(body) == 0 {
		return nil, nil
	}
	if len(body) > otlpMaxRequest {
		return nil, fmt.Errorf("request body too large: exceeded %d bytes", otlpMaxRequest)
	}
	if !gz {
		return body, nil
	}
	enc.gzb.Reset()
	if enc.gz == nil {
		enc.gz = gzip.NewWriter(&enc.gzb)
	} else {
		enc.gz.Reset(&enc.gzb)
	}
	if _, err := enc.gz.Write(body); err != nil {
		return nil, err
	}
	if err := enc.gz.Close(); err != nil {
		return nil, err
	}
	return enc.gzb.Bytes(), nil
}

// post sends body once. A failure worth retrying is a *retryable.
func (e *httpExporter) post(ctx context.Context, body []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", userAgent)
	for k, v := range e.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", contentTypeProto)
	if e.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := e.client.Do(req)
	var uerr *url.Error
	if errors.As(err, &uerr) && uerr.Temporary() {
		return &retryable{err: err}
	}
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, otlpMaxResponse+1))
	if err != nil {
		return err
	}
	if len(data) > otlpMaxResponse {
		return fmt.Errorf("response body too large: exceeded %d bytes", otlpMaxResponse)
	}
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return partialSuccess(resp.Header.Get("Content-Type"), data)
	}
	msg := strings.TrimSpace(string(data))
	if msg == "" {
		msg = "(empty)"
	}
	bodyErr := fmt.Errorf("body: %s", msg)
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return &retryable{err: bodyErr, throttle: retryAfter(resp.Header.Get("Retry-After"))}
	}
	return fmt.Errorf("failed to send to %s: %s (%w)", e.url, resp.Status, bodyErr)
}

// partialSuccess reads a 2xx answer's ExportTraceServiceResponse and
// reports the spans it rejected, if any.
func partialSuccess(contentType string, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	var msg collectortrace.ExportTraceServiceResponse
	switch contentType {
	case contentTypeProto:
		if err := proto.Unmarshal(data, &msg); err != nil {
			return err
		}
	case contentTypeJSON:
		if err := protojson.Unmarshal(data, &msg); err != nil {
			return err
		}
	default:
		return nil
	}
	ps := msg.GetPartialSuccess()
	if n, m := ps.GetRejectedSpans(), ps.GetErrorMessage(); n != 0 || m != "" {
		return fmt.Errorf("OTLP partial success: %s (%d spans rejected)", m, n)
	}
	return nil
}

// retryable is a failure worth another try, after throttle at least.
type retryable struct {
	err      error
	throttle time.Duration
}

// Error says the failure.
func (r *retryable) Error() string { return "retry-able request failure: " + r.err.Error() }

// Unwrap gives the failure.
func (r *retryable) Unwrap() error { return r.err }

// retryAfter parses a Retry-After header: seconds or an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
		return time.Duration(min(s, int64(1<<63-1)/int64(time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// run calls try until it succeeds, fails for good, or the schedule runs
// out: the stock exporter's exponential back-off (×1.5, ±50 % jitter),
// never shorter than the server's Retry-After, and no wait that would end
// past maxElapsed.
func (b backoff) run(ctx context.Context, try func() error) error {
	start, interval := time.Now(), b.initial
	for {
		err := try()
		var r *retryable
		if err == nil || !errors.As(err, &r) {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %w", context.Cause(ctx), err)
		}
		if time.Since(start) > b.maxElapsed {
			return fmt.Errorf("max retry time elapsed: %w", err)
		}
		delay := max(r.throttle, time.Duration(float64(interval)*(0.5+rand.Float64())))
		interval = min(time.Duration(float64(interval)*1.5), b.max)
		if time.Since(start)+r.throttle > b.maxElapsed {
			return fmt.Errorf("max retry time would elapse: %w", err)
		}
		if werr := b.wait(ctx, delay); werr != nil {
			return fmt.Errorf("%w: %w", werr, err)
		}
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// Shutdown ends in-flight posts and their retries; later exports fail at
// once. The span processors flush before it is called (Setup.Shutdown).
func (e *httpExporter) Shutdown(ctx context.Context) error {
	e.stop()
	e.client.CloseIdleConnections()
	return ctx.Err()
}
