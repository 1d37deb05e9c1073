package request

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencepost/fencepost/proxy/leases"
)

// Request decisions, the values of the "decision" label.
const (
	DecisionForwarded = "forwarded" // sent upstream (or tunnelled)
	DecisionBlocked   = "blocked"   // refused for want of a current lease
	DecisionRejected  = "rejected"  // refused as malformed or not allowed
	DecisionReplayed  = "replayed"  // answered from the effect journal
)

// metrics are the request path's Prometheus collectors. No label ever
// carries a task id: label values are bounded enums.
type metrics struct {
	requests        *prometheus.CounterVec   // decision
	writesBlocked   *prometheus.CounterVec   // reason
	upstreamLatency *prometheus.HistogramVec // kind: read|write

	// The children every forwarded request touches, resolved once:
	// WithLabelValues hashes the label values and takes a lock on every
	// call, which the proxy path does not need to pay per request.
	forwarded     prometheus.Counter
	upstreamRead  prometheus.Observer
	upstreamWrite prometheus.Observer
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencepost_sidecar_requests_total",
			Help: "Proxy requests by decision: forwarded, blocked (no current lease), rejected (malformed or not allowed).",
		}, []string{"decision"}),
		writesBlocked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencepost_sidecar_writes_blocked_total",
			Help: "Writes the sidecar refused to send because the lease was not current, by reason.",
		}, []string{"reason"}),
		upstreamLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fencepost_sidecar_upstream_duration_seconds",
			Help:    "Time from sending a request upstream to its response headers.",
			Buckets: prometheus.DefBuckets,
		}, []string{"kind"}),
	}
	// Every known label value starts at 0 so a rate() or increase() alert
	// sees the first block or event instead of a series that appears from
	// nothing.
	for _, d := range []string{DecisionForwarded, DecisionBlocked, DecisionRejected} {
		m.requests.WithLabelValues(d)
	}
	m.forwarded = m.requests.WithLabelValues(DecisionForwarded)
	m.upstreamRead = m.upstreamLatency.WithLabelValues("read")
	m.upstreamWrite = m.upstreamLatency.WithLabelValues("write")
	for _, r := range leases.Reasons() {
		m.writesBlocked.WithLabelValues(string(r))
	}
	for _, c := range []prometheus.Collector{m.requests, m.writesBlocked, m.upstreamLatency} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("proxy: register metrics: %w", err)
		}
	}
	return m, nil
}
