package proxy

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/cluster"
	"github.com/fencepost/fencepost/proxy/leases"
	"github.com/fencepost/fencepost/proxy/proxytrace"
)

// A sidecar given several clusters (Config.Clusters) keeps one keeper
// per cluster behind a leases.Router; which cluster a task goes to is
// decided by proxy/cluster.Rank, the rendezvous order ctl and the console
// use too. Metrics of the keepers carry a cluster label (the name, never
// a task id); a single cluster's keep no label, as before.

// ClusterShard is one of several clusters a sidecar is given: its name
// in the hash (it must never change while the cluster holds tasks) and
// its members' endpoints, or a client (then New builds none for it).
type ClusterShard struct {
	Name      string
	Endpoints []string
	// Client, when set, is used instead of a client New builds from
	// Endpoints (a TLS client built by the caller, or a test's double).
	Client Cluster
}

// validateClusters checks Clusters: names unique and non-empty, each with
// endpoints or a client, and neither Endpoints nor a New Cluster beside.
func (c Config) validateClusters() error {
	if len(c.Clusters) == 0 {
		return nil
	}
	if len(c.Endpoints) > 0 {
		return fmt.Errorf("%w: clusters: set either endpoints (one cluster) or clusters, not both", ErrInvalidConfig)
	}
	seen := map[string]bool{}
	for i, s := range c.Clusters {
		switch {
		case s.Name == "":
			return fmt.Errorf("%w: clusters[%d]: name is required", ErrInvalidConfig, i)
		case seen[s.Name]:
			return fmt.Errorf("%w: clusters[%d]: name %q given twice", ErrInvalidConfig, i, s.Name)
		case len(s.Endpoints) == 0 && s.Client == nil:
			return fmt.Errorf("%w: clusters[%d] (%s): endpoints are required", ErrInvalidConfig, i, s.Name)
		}
		seen[s.Name] = true
	}
	return nil
}

// allEndpoints are the endpoints of every cluster the sidecar talks to:
// the request path refuses to proxy to any of them.
func (c Config) allEndpoints() []string {
	out := append([]string(nil), c.Endpoints...)
	for _, s := range c.Clusters {
		out = append(out, s.Endpoints...)
	}
	return out
}

// members builds the router's members: one cluster (c, or a client of
// cfg.Endpoints) or every entry of cfg.Clusters. owned are the clients
// built here, which Shutdown closes.
func (cfg Config) members(c Cluster, tr *proxytrace.Tracer) (ms []leases.Member, owned []*cluster.Client, err error) {
	build := func(field string, eps []string) (Cluster, error) {
		cc, err := cluster.New(cluster.Config{Endpoints: eps, Timeout: cfg.ClusterTimeout,
			HeartbeatTransport: cfg.HeartbeatTransport, Logger: cfg.Logger.Named("cluster"), Trace: proxytrace.ClusterHook(cfg.TracerProvider)})
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrInvalidConfig, field, err)
		}
		owned = append(owned, cc)
		return cc, nil
	}
	defer func() {
		if err != nil {
			for _, cc := range owned {
				cc.Close()
			}
			owned = nil
		}
	}()
	if len(cfg.Clusters) == 0 {
		if c == nil {
			if len(cfg.Endpoints) == 0 {
				return nil, nil, fmt.Errorf("%w: endpoints: required when no cluster client is given", ErrInvalidConfig)
			}
			if c, err = build("endpoints", cfg.Endpoints); err != nil {
				return nil, nil, err
			}
		}
		return []leases.Member{{Cluster: c, Settings: cfg.leaseSettings(tr)}}, owned, nil
	}
	if c != nil {
		return nil, nil, fmt.Errorf("%w: clusters: a sidecar given clusters takes no single cluster client", ErrInvalidConfig)
	}
	for i, s := range cfg.Clusters {
		cl := s.Client
		if cl == nil {
			if cl, err = build(fmt.Sprintf("clusters[%d] (%s)", i, s.Name), s.Endpoints); err != nil {
				return nil, nil, err
			}
		}
		ls := cfg.leaseSettings(tr)
		ls.Registerer = prometheus.WrapRegistererWith(prometheus.Labels{"cluster": s.Name}, cfg.Registerer)
		ms = append(ms, leases.Member{Name: s.Name, Cluster: cl, Settings: ls})
	}
	return ms, owned, nil
}

// registerClusterGauges exports, with several clusters, whether each
// cluster is up for the sidecar (fencepost_sidecar_cluster_up, by
// cluster name: a session open and the last heartbeat answered), so a
// dashboard shows which cluster a sidecar lost.
func registerClusterGauges(reg prometheus.Registerer, r *leases.Router) error {
	if len(r.Names()) < 2 {
		return nil
	}
	for i, name := range r.Names() {
		g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "fencepost_sidecar_cluster_up",
			Help:        "1 while the sidecar has a session with the named cluster and its last heartbeat was answered, else 0.",
			ConstLabels: prometheus.Labels{"cluster": name},
		}, func() float64 {
			if r.Clusters()[i].Up {
				return 1
			}
			return 0
		})
		if err := reg.Register(g); err != nil {
			return fmt.Errorf("proxy: register metrics: %w", err)
		}
	}
	return nil
}

// routedJournal sends each journal call to its task's cluster.
type routedJournal struct{ r *leases.Router }

// Intent records a journaled write's intent in the task's cluster.
func (j routedJournal) Intent(ctx context.Context, taskID string, req api.IntentRequest) (api.IntentResponse, error) {
	return j.r.ClusterFor(taskID).(Journal).Intent(ctx, taskID, req)
}

// Outcome records a journaled write's outcome in the task's cluster.
func (j routedJournal) Outcome(ctx context.Context, taskID, key string, req api.OutcomeRequest) (lease.Effect, error) {
	return j.r.ClusterFor(taskID).(Journal).Outcome(ctx, taskID, key, req)
}

// Clusters is each cluster's state (session open, leases held), in the
// order configured; one entry, named "", with one cluster.
func (s *Sidecar) Clusters() []ClusterState { return s.keeper.Clusters() }
