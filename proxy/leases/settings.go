package leases

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/proxy/clock"
	"github.com/fencepost/fencepost/proxy/proxytrace"
)

// Settings is what the keeper needs of the sidecar's configuration,
// defaults already applied (package proxy owns the defaults).
type Settings struct {
	WorkerID string // the worker the session is opened for
	Task     string // one-task mode (the Router's): the task acquired at start ("" off)
	Profile  string // one-task mode: the profile of a task it creates
	// Cluster names the keeper's cluster among several (its logs say
	// which); "" with one cluster.
	Cluster string
	// Drift and MarginFloor make the safety margin taken off a validity.
	Drift            float64
	MarginFloor      time.Duration
	SessionHeartbeat time.Duration // heartbeat interval while no lease asks for less
	ClusterTimeout   time.Duration // bound of one cluster call
	Logger           *zap.Logger
	Registerer       prometheus.Registerer
	Clock            clock.Clock
	Tracer           *proxytrace.Tracer // lease events as spans; nil off
}

// Sentinel errors of the keeper.
var (
	// ErrNoSession: the sidecar has no cluster session yet.
	ErrNoSession = errors.New("no cluster session")
	// ErrNoLease: the sidecar holds no lease for the task.
	ErrNoLease = errors.New("no current lease")
	// ErrAmbiguousTask: several leases are held and none was named.
	ErrAmbiguousTask = errors.New("several leases held; name the task")
)

// metrics are the keeper's Prometheus series.
type metrics struct {
	heartbeatLatency prometheus.Histogram
	heartbeatFails   prometheus.Counter
	tunnelsCut       prometheus.Counter
	leaseEvents      *prometheus.CounterVec // kind
	blockReports     *prometheus.CounterVec // result
}

// newMetrics registers the keeper's series, the two gauges reading t.
func newMetrics(reg prometheus.Registerer, clk clock.Clock, t *leaseTable) (*metrics, error) {
	m := &metrics{
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
		leaseEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencepost_sidecar_lease_events_total",
			Help: "Lease events by kind (acquired, released, lost, revived, revoked).",
		}, []string{"kind"}),
		blockReports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencepost_sidecar_block_reports_total",
			Help: "Reports of blocked writes to the cluster's task history, by result (sent, failed, dropped: too many tasks waiting).",
		}, []string{"result"}),
	}
	for _, r := range []string{"sent", "failed", "dropped"} {
		m.blockReports.WithLabelValues(r)
	}
	for _, k := range []EventKind{EventAcquired, EventReleased, EventLost, EventRevived, EventRevoked} {
		m.leaseEvents.WithLabelValues(string(k))
	}
	cs := []prometheus.Collector{
		m.heartbeatLatency, m.heartbeatFails, m.tunnelsCut, m.leaseEvents, m.blockReports,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fencepost_sidecar_lease_remaining_seconds",
			Help: "Smallest remaining local validity among current leases (0 when none is current).",
		}, func() float64 { return t.minRemaining(clk.Now()).Seconds() }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fencepost_sidecar_leases_held",
			Help: "Leases the sidecar holds (current or not yet given up).",
		}, func() float64 { return float64(t.count()) }),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("proxy: register metrics: %w", err)
		}
	}
	return m, nil
}
