package proxy

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Request decisions, the values of the "decision" label.
const (
	decisionForwarded = "forwarded" // sent upstream (or tunnelled)
	decisionBlocked   = "blocked"   // refused for want of a current lease
	decisionRejected  = "rejected"  // refused as malformed or not allowed
	decisionReplayed  = "replayed"  // answered from the effect journal
)

// metrics are the sidecar's Prometheus collectors. No label ever carries a
// task id: label values are bounded enums.
// The kinds of CONNECT tunnel fencepost_sidecar_tunnels_total counts.
const (
	tunnelIntercepted = "intercepted"
	tunnelHTTP        = "http"
	tunnelBlind       = "blind"
	tunnelClosed      = "closed"
)

type metrics struct {
	requests         *prometheus.CounterVec // decision
	writesBlocked    *prometheus.CounterVec // reason
	heartbeatLatency prometheus.Histogram
	heartbeatFails   prometheus.Counter
	tunnelsCut       prometheus.Counter
	tunnels          *prometheus.CounterVec   // kind: intercepted|http|blind|closed
	upstreamLatency  *prometheus.HistogramVec // kind: read|write
	leaseEvents      *prometheus.CounterVec   // kind

	// The children every forwarded request touches, resolved once:
	// WithLabelValues hashes the label values and takes a lock on every
	// call, which the proxy path does not need to pay per request.
	forwarded     prometheus.Counter
	upstreamRead  prometheus.Observer
	upstreamWrite prometheus.Observer
}

func newMetrics(reg prometheus.Registerer, remaining func() time.Duration, held func() int) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencepost_sidecar_requests_total",
			Help: "Proxy requests by decision: forwarded, blocked (no current lease), rejected (malformed or not allowed).",
		}, []string{"decision"}),
		writesBlocked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencepost_sidecar_writes_blocked_total",
			Help: "Writes the sidecar refused to send because the lease was not current, by reason.",
		}, []string{"reason"}),
		heartbeatLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "fencepost_sidecar_heartbeat_duration_seconds",
			Help:    "Latency of successful heartbeats to the cluster.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
		heartbeatFails: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fencepost_sidecar_heartbeat_failures_total",
			Help: "Heartbeat attempts that failed (each is retried with jitter).",
		}),
		tunnelsCut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fencepost_sidecar_tunnels_cut_total",
			Help: "CONNECT tunnels closed because their lease stopped being current.",
		}),
		tunnels: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencepost_sidecar_tunnels_total",
			Help: "CONNECT tunnels opened, by what they carry: intercepted (TLS the sidecar completed), http (plain HTTP), blind (connect.allow, unfenced), closed (nothing it can fence: TLS to a host not intercepted, HTTP/2, garbage, silence).",
		}, []string{"kind"}),
		upstreamLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fencepost_sidecar_upstream_duration_seconds",
			Help:    "Time from sending a request upstream to its response headers.",
			Buckets: prometheus.DefBuckets,
		}, []string{"kind"}),
		leaseEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencepost_sidecar_lease_events_total",
			Help: "Lease events by kind (acquired, released, lost, revived, revoked).",
		}, []string{"kind"}),
	}
	// Every known label value starts at 0 so a rate() or increase() alert
	// sees the first block or event instead of a series that appears from
	// nothing.
	for _, d := range []string{decisionForwarded, decisionBlocked, decisionRejected} {
		m.requests.WithLabelValues(d)
	}
	m.forwarded = m.requests.WithLabelValues(decisionForwarded)
	m.upstreamRead = m.upstreamLatency.WithLabelValues("read")
	m.upstreamWrite = m.upstreamLatency.WithLabelValues("write")
	for _, r := range []Reason{ReasonNone, ReasonExpired, ReasonSuspect, ReasonRevoked, ReasonWaiting, ReasonReleased, ReasonLost, ReasonAmbig} {
		m.writesBlocked.WithLabelValues(string(r))
	}
	for _, k := range []EventKind{EventAcquired, EventReleased, EventLost, EventRevived, EventRevoked} {
		m.leaseEvents.WithLabelValues(string(k))
	}
	for _, k := range []string{tunnelIntercepted, tunnelHTTP, tunnelBlind, tunnelClosed} {
		m.tunnels.WithLabelValues(k)
	}
	cs := []prometheus.Collector{
		m.requests, m.writesBlocked, m.heartbeatLatency, m.heartbeatFails, m.tunnelsCut, m.tunnels,
		m.upstreamLatency, m.leaseEvents,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fencepost_sidecar_lease_remaining_seconds",
			Help: "Smallest remaining local validity among current leases (0 when none is current).",
		}, func() float64 { return remaining().Seconds() }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fencepost_sidecar_leases_held",
			Help: "Leases the sidecar holds (current or not yet given up).",
		}, func() float64 { return float64(held()) }),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("proxy: register metrics: %w", err)
		}
	}
	return m, nil
}

// registerCAExpiry exports when the interception CA expires. The CA is
// not renewed while the sidecar runs (a worker that loaded the bundle at
// start would not trust a new one), so intercepted calls start failing
// at that instant unless the sidecar and its worker restart before it:
// this is what an alert watches.
func registerCAExpiry(reg prometheus.Registerer, notAfter time.Time) error {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fencepost_sidecar_intercept_ca_expiry_timestamp_seconds",
		Help: "When the sidecar's interception CA expires (Unix seconds); restart the sidecar and its worker before it.",
	})
	g.Set(float64(notAfter.Unix()))
	if err := reg.Register(g); err != nil {
		return fmt.Errorf("proxy: register metrics: %w", err)
	}
	return nil
}
