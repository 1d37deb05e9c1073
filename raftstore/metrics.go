package raftstore

import (
	"errors"

	"github.com/fencepost/fencepost/fence/lease"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the store's Prometheus series (DESIGN.md 9). Counters of
// leader-driven transitions are counted where they are proposed, on the
// leader, so summing over the nodes of a cluster counts each event once.
// No label carries a task or session id.
type metrics struct {
	heartbeats       prometheus.Counter
	heartbeatLatency prometheus.Histogram
	renewals         prometheus.Counter
	suspected        prometheus.Counter
	expired          prometheus.Counter
	reclaimed        prometheus.Counter
	revived          prometheus.Counter
	resumed          prometheus.Counter
	inDoubt          prometheus.Counter
	sessionsClosed   prometheus.Counter
	pausedSeconds    prometheus.Histogram
	alarms           *prometheus.CounterVec
	acquireContended prometheus.Counter
	proposalLatency  prometheus.Histogram
	applyErrors      *prometheus.CounterVec
	verifyRounds     prometheus.CounterFunc

	collectors []prometheus.Collector
}

const ns = "fencepost"

func newMetrics(s *Store) *metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: "cluster", Name: name, Help: help})
	}
	m := &metrics{
		heartbeats: counter("heartbeats_total", "Heartbeats acknowledged by this node as leader."),
		heartbeatLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: "cluster",
			Name: "heartbeat_duration_seconds", Help: "Time from a heartbeat's arrival to its acknowledgement (includes the VerifyLeader round).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		renewals:       counter("lease_renewals_total", "Leases renewed in leader memory by heartbeats."),
		suspected:      counter("lease_suspected_total", "Leases moved to suspect_dead (heartbeat overdue)."),
		expired:        counter("lease_expired_total", "Leases moved to expired (grace over)."),
		reclaimed:      counter("lease_reclaimed_total", "Lease expiries reclaimed: the resume guard passed and the task became claimable."),
		revived:        counter("lease_revived_total", "suspect_dead leases revived by a late heartbeat with the same epoch."),
		resumed:        counter("resume_success_total", "Grants of a task whose previous lease was reclaimed (resume after reclaim); divide by lease_reclaimed_total for the resume success rate."),
		inDoubt:        counter("effects_in_doubt_total", "Journaled effects the resume guard reported in doubt."),
		sessionsClosed: counter("sessions_closed_idle_total", "Sessions closed by the leader for being idle."),
		pausedSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: "cluster",
			Name: "paused_waiting_seconds", Help: "Time tasks spent in paused_waiting_external, observed when signalled.",
			Buckets: prometheus.ExponentialBuckets(0.1, 4, 12)}),
		alarms: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "cluster",
			Name: "double_execution_alarms_total", Help: "Signs of two workers acting for one task: kind=heartbeat_foreign_lease (a heartbeat for a lease someone else holds), kind=superseded_owner_acted (a checkpoint, wait, release or journal intent under an epoch a newer owner's lease replaced)."},
			[]string{"kind"}),
		acquireContended: counter("acquire_contended_total", "Acquires and claims refused because another session holds the task (lease_held): hot standbys waiting their turn, not a double execution."),
		proposalLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: "cluster",
			Name: "proposal_duration_seconds", Help: "Time from raft.Apply to the entry being applied on the leader.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		applyErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "cluster",
			Name: "apply_errors_total", Help: "Proposals the model refused, by op and error code."}, []string{"op", "code"}),
	}
	m.verifyRounds = prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Subsystem: "cluster",
		Name: "verify_leader_rounds_total", Help: "VerifyLeader rounds run (each serves a batch of heartbeats and reads)."},
		func() float64 {
			if s.verify == nil {
				return 0
			}
			return float64(s.verify.roundCount())
		})
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Subsystem: "raft", Name: name, Help: help}, f)
	}
	for _, k := range alarmKinds {
		m.alarms.WithLabelValues(k)
	}
	m.collectors = []prometheus.Collector{
		m.heartbeats, m.heartbeatLatency, m.renewals, m.suspected, m.expired, m.reclaimed, m.revived,
		m.resumed, m.inDoubt, m.sessionsClosed, m.pausedSeconds, m.alarms, m.acquireContended, m.proposalLatency,
		m.applyErrors, m.verifyRounds, s.layer.refused,
		gauge("leader", "1 when this node is the raft leader.", func() float64 {
			if s.raft.State() == raft.Leader {
				return 1
			}
			return 0
		}),
		gauge("term", "Current raft term.", func() float64 { return float64(s.raft.CurrentTerm()) }),
		gauge("commit_index", "Raft commit index.", func() float64 { return float64(s.raft.CommitIndex()) }),
		gauge("applied_index", "Index applied to the lease FSM.", func() float64 { return float64(s.fsm.applied.get()) }),
		gauge("tls_cert_expiry_timestamp_seconds", "When this member's current certificate expires (Unix seconds; 0 without TLS). Rotated files are picked up within a second (fence/pki.Source).", func() float64 {
			if s.cfg.TLS == nil {
				return 0
			}
			return float64(s.cfg.TLS.Current().Leaf.NotAfter.Unix())
		}),
		gauge("apply_halted", "1 when this member stopped applying the log at an entry it cannot read (format.go; the log says which).", s.haltedGauge),
		&stateCollector{s: s,
			tasks:    prometheus.NewDesc(ns+"_cluster_tasks", "Tasks by state (this replica's view).", []string{"state"}, nil),
			leases:   prometheus.NewDesc(ns+"_cluster_leases", "Current leases by status (this replica's view).", []string{"status"}, nil),
			sessions: prometheus.NewDesc(ns+"_cluster_sessions", "Open sessions.", nil, nil),
		},
	}
	return m
}

func (m *metrics) register(r prometheus.Registerer) error {
	for i, c := range m.collectors {
		if err := r.Register(c); err != nil {
			for _, done := range m.collectors[:i] {
				r.Unregister(done)
			}
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return errors.New("raftstore: metrics already registered on this Registerer")
			}
			return err
		}
	}
	return nil
}

func (m *metrics) unregister(r prometheus.Registerer) {
	for _, c := range m.collectors {
		r.Unregister(c)
	}
}

// stateCollector reports the model's task and lease counts at scrape time,
// from the local replica, under the FSM's read lock.
type stateCollector struct {
	s                       *Store
	tasks, leases, sessions *prometheus.Desc
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.tasks
	ch <- c.leases
	ch <- c.sessions
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	tasks := map[lease.TaskState]int{}
	leases := map[lease.Status]int{}
	var sessions int
	c.s.fsm.read(func(m *lease.Model) {
		tasks, sessions = m.Counts()
		for l := range m.LiveScan() {
			leases[l.Status]++
		}
	})
	leases[lease.StatusPausedWaiting] = tasks[lease.TaskWaiting]
	for _, st := range []lease.TaskState{lease.TaskPending, lease.TaskLeased, lease.TaskWaiting, lease.TaskCompleted, lease.TaskFailed, lease.TaskCancelled} {
		ch <- prometheus.MustNewConstMetric(c.tasks, prometheus.GaugeValue, float64(tasks[st]), string(st))
	}
	for _, st := range []lease.Status{lease.StatusActive, lease.StatusSuspectDead, lease.StatusExpired, lease.StatusPausedWaiting} {
		ch <- prometheus.MustNewConstMetric(c.leases, prometheus.GaugeValue, float64(leases[st]), string(st))
	}
	ch <- prometheus.MustNewConstMetric(c.sessions, prometheus.GaugeValue, float64(sessions))
}
