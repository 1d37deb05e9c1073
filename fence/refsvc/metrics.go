package refsvc

import (
	"github.com/fencepost/fencepost/fence"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the service's counters. Labels carry only bounded values
// (problem reasons), never task ids.
type metrics struct {
	accepted prometheus.Counter
	replayed prometheus.Counter
	stale    prometheus.Counter
	rejected *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		accepted: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "fencepost", Subsystem: "refsvc", Name: "writes_accepted_total",
			Help: "Writes whose epoch was current and that were appended to the log.",
		}),
		replayed: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "fencepost", Subsystem: "refsvc", Name: "writes_replayed_total",
			Help: "Writes answered from the idempotency store without running again (includes replays for a newer owner after a reclaim).",
		}),
		stale: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "fencepost", Subsystem: "refsvc", Name: "writes_stale_rejected_total",
			Help: "Writes rejected because a newer epoch was already seen for the task: a replaced owner was still writing (double-execution alarm).",
		}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "fencepost", Subsystem: "refsvc", Name: "writes_rejected_total",
			Help: "Writes rejected, by reason (the last segment of the problem type; write-failed also counts writes the handler answered with a 5xx).",
		}, []string{"reason"}),
	}
	for _, c := range []prometheus.Collector{m.accepted, m.replayed, m.stale, m.rejected} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// Every reason exists from the start, so rate() and alerts see zeros.
	for _, typ := range fence.ProblemTypes() {
		p := fence.Problem{Type: typ}
		m.rejected.WithLabelValues(p.Reason())
	}
	return m, nil
}

// observe is the validator's Observer.
func (m *metrics) observe(d fence.Decision) {
	switch {
	case d.Outcome == fence.Executed && d.Status < 500:
		m.accepted.Inc()
	case d.Outcome == fence.Replayed:
		m.replayed.Inc()
	case d.Outcome == fence.Executed:
		m.rejected.WithLabelValues("write-failed").Inc()
	case d.Problem != nil:
		m.rejected.WithLabelValues(d.Problem.Reason()).Inc()
		if d.Problem.Type == fence.ProblemStaleToken {
			m.stale.Inc()
		}
	}
}
