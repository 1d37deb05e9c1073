package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
	"go.uber.org/zap"
)

// httpMetrics are the server's own metrics. They live in a registry of the
// server's own, so several servers in one process (tests) never collide,
// and are served together with Config.Gatherer. Labels are route
// templates, never ids: cardinality stays fixed.
type httpMetrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	forwards *prometheus.CounterVec
	denied   *prometheus.CounterVec
	// refusalsLimited counts requests answered 429 because their caller
	// was refused too often (refusals.go).
	refusalsLimited prometheus.Counter
	// streams is the heartbeat streams open (stream.go); streamBadFrames
	// counts those closed on a malformed frame.
	streams         prometheus.Gauge
	streamBadFrames prometheus.Counter
	handler         fasthttp.RequestHandler
}

func newHTTPMetrics(extra prometheus.Gatherer) *httpMetrics {
	m := &httpMetrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencepost_http_requests_total",
			Help: "Cluster API requests by route template, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fencepost_http_request_duration_seconds",
			Help:    "Cluster API request latency by route template, forwards included.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"route"}),
		forwards: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencepost_http_forwards_total",
			Help: "Requests a follower forwarded to the leader, by result (ok, unreachable, broken, no_leader, loop).",
		}, []string{"result"}),
	}
	m.denied = newDeniedCounter()
	m.refusalsLimited = prometheus.NewCounter(prometheus.CounterOpts{Name: "fencepost_http_refusals_limited_total",
		Help: "Cluster API requests answered 429 because their caller (source and identity) was refused too often."})
	m.streams = prometheus.NewGauge(prometheus.GaugeOpts{Name: "fencepost_http_heartbeat_streams",
		Help: "Heartbeat streams open on this member."})
	m.streamBadFrames = prometheus.NewCounter(prometheus.CounterOpts{Name: "fencepost_http_heartbeat_stream_bad_frames_total",
		Help: "Heartbeat streams closed because the client sent a malformed frame."})
	m.reg.MustRegister(m.requests, m.duration, m.forwards, m.denied, m.refusalsLimited, m.streams, m.streamBadFrames)
	// Known results start at 0 so alerts see the first forward failure.
	for _, r := range []string{"ok", "loop", "no_leader", "unreachable", "broken"} {
		m.forwards.WithLabelValues(r)
	}
	gs := prometheus.Gatherers{m.reg}
	if extra != nil {
		gs = append(gs, extra)
	}
	m.handler = fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(gs, promhttp.HandlerOpts{}))
	return m
}

func (m *httpMetrics) observe(route, method string, status int, took time.Duration) {
	m.requests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(route).Observe(took.Seconds())
}

func (s *Server) metricsHandler(rc *fasthttp.RequestCtx) {
	s.metrics.handler(rc)
}

// observe records a finished request in the metrics and, at debug level,
// the access log. logger.Check keeps the disabled log path allocation-free.
func (s *Server) observe(tc context.Context, rc *fasthttp.RequestCtx, route, rid string, forwarded bool, start time.Time) {
	took := time.Since(start)
	status := rc.Response.StatusCode()
	method := methodLabel(rc.Method())
	s.metrics.observe(route, method, status, took)
	if ce := s.log.Check(zap.DebugLevel, "http request"); ce != nil {
		ce.Write(withTrace(tc, zap.String("rid", rid), zap.String("method", method), zap.ByteString("path", rc.Path()),
			zap.String("route", route), zap.Int("status", status), zap.Bool("forwarded", forwarded),
			zap.Duration("took", took), zap.String("remote", rc.RemoteAddr().String()))...)
	}
}

// encodeBufs holds scratch buffers for hand-encoded replies.
var encodeBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// putEncodeBuf returns a scratch buffer to the pool unless a large payload
// grew it: one big task must not pin its size in every pooled buffer.
func putEncodeBuf(b *[]byte) {
	if cap(*b) <= 64<<10 {
		encodeBufs.Put(b)
	}
}

// writeJSON writes a success answer; 204 and a nil body write no body.
func writeJSON(rc *fasthttp.RequestCtx, status int, body any) error {
	if status == http.StatusNoContent || body == nil {
		rc.SetStatusCode(status)
		return nil
	}
	rc.SetContentType("application/json")
	buf := encodeBufs.Get().(*[]byte)
	var ok bool
	if *buf, ok = encodeReply((*buf)[:0], body); ok {
		rc.SetStatusCode(status)
		rc.SetBody(*buf) // copies: the scratch buffer goes back to the pool
		putEncodeBuf(buf)
		return nil
	}
	putEncodeBuf(buf)
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	rc.SetStatusCode(status)
	rc.SetBody(b)
	return nil
}

// methodLabel bounds the method label: a client sending made-up methods
// must not grow the metric's series.
func methodLabel(m []byte) string {
	switch string(m) {
	case fasthttp.MethodGet, fasthttp.MethodHead, fasthttp.MethodPost, fasthttp.MethodPut,
		fasthttp.MethodDelete, fasthttp.MethodPatch, fasthttp.MethodOptions:
		return string(m)
	}
	return "other"
}
