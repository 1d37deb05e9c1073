package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/config"
	"github.com/fencepost/fencepost/fence/pki"
	"github.com/fencepost/fencepost/proxy"
	"github.com/fencepost/fencepost/proxy/cluster"
	"github.com/fencepost/fencepost/proxy/proxytrace"
)

const sidecarUsage = `Usage: fencepost sidecar [flags]

Runs the sidecar beside one worker: it holds a session with the lease
cluster and heartbeats for the worker, and it is the worker's HTTP_PROXY —
every outbound call is stamped with X-Fencing-Token and Idempotency-Key, and
every write is refused (409, never forwarded) once the lease is no longer
current. The worker's control API, /healthz, /readyz and /metrics are on
control_addr.

With --task the sidecar runs in one-task mode: it creates or acquires that
task at start, /readyz waits for the lease, and on SIGTERM it drains, then
gives the lease back so another worker can take over at once.

With --capture-listen 127.0.0.1:7483 it also serves the transparent listener
that fencepost capture's nat rules redirect the worker's outbound TCP to, so
a client that ignores HTTP_PROXY is fenced too (README "Closing the bypass").

Against a TLS cluster pass its CA and this sidecar's certificate
(cluster_tls.*); a sidecar speaking plain HTTP to a TLS cluster, or TLS to
a plain one, exits 2 at start saying which flags to pass or drop.

Examples:
  fencepost sidecar --cluster 127.0.0.1:7400,127.0.0.1:7410,127.0.0.1:7420 --worker-id w1 --task run_456 \
    --cluster-tls-ca-file tls/ca.pem --cluster-tls-cert-file tls/sidecar-w1.pem --cluster-tls-key-file tls/sidecar-w1-key.pem
  fencepost sidecar --cluster 127.0.0.1:7400 --task run_456 --profile workflow   # a plain cluster on loopback

  # then, in the worker (NO_PROXY: the control API, never localhost):
  export HTTP_PROXY=http://127.0.0.1:7480 http_proxy=http://127.0.0.1:7480 NO_PROXY=127.0.0.1 no_proxy=127.0.0.1
  curl -X POST http://tool.internal/v1/act        # stamped, or 409 without a lease
`

func init() {
	register(&command{name: "sidecar", summary: "run the sidecar (HTTP_PROXY + heartbeats) beside a worker", usage: sidecarUsage, run: runSidecar})
}

func runSidecar(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("sidecar")
	flags := config.BindFlags(fs, config.RoleSidecar)
	if code, ok := parseFlags(fs, sidecarUsage, args, stdout, stderr); !ok {
		return code
	}
	cfg, code := loadRole[*config.Sidecar](config.RoleSidecar, flags, "sidecar", stderr)
	if code != exitOK {
		return code
	}
	log, err := newLogger(cfg.Log, stderr)
	if err != nil {
		return reportError(stderr, "sidecar", err)
	}
	defer func() { _ = log.Sync() }()
	traces, stopTraces, err := startTracing(cfg.Tracing, stdout, log)
	if err != nil {
		return reportError(stderr, "sidecar", startError(err))
	}
	defer stopTraces() // after the drain: the last requests' spans too
	sc, err := startSidecar(ctx, cfg, log, newRegistry(), traces.Provider("sidecar"))
	if err != nil {
		return reportError(stderr, "sidecar", err)
	}
	<-ctx.Done()
	log.Info("draining; the lease is given back when in-flight requests finish")
	if err := stopSidecar(sc, cfg); err != nil {
		return reportError(stderr, "sidecar", err)
	}
	log.Info("stopped")
	return exitOK
}

// startSidecar builds and starts a sidecar from its configuration.
func startSidecar(ctx context.Context, cfg *config.Sidecar, log *zap.Logger, reg *prometheus.Registry, tp trace.TracerProvider) (*proxy.Sidecar, error) {
	pc := sidecarConfig(cfg, log, reg)
	pc.TracerProvider = tp
	// With cluster_tls the client is built here, over TLS: the sidecar
	// verifies the cluster against the CA and presents its own certificate.
	var cc proxy.Cluster
	src, err := cfg.ClusterTLS.Source("cluster_tls")
	if err != nil {
		return nil, err
	}
	if err := checkClusterScheme(ctx, cfg, src); err != nil {
		return nil, err
	}
	if src != nil {
		// The cluster refuses a session under a worker id the certificate
		// does not name; say so at start, naming the key.
		if ids := pki.WorkerIDs(src.Current().Leaf); !pki.MayUseWorker(ids, cfg.WorkerID) {
			return nil, fmt.Errorf("%w: worker_id %q: the cluster_tls certificate may open sessions only as %q (set worker_id to one, or issue the certificate with --worker-ids)",
				config.ErrInvalid, cfg.WorkerID, ids)
		}
		timeout := pc.ClusterTimeout
		if timeout == 0 {
			timeout = proxy.DefaultClusterTimeout
		}
		newClient := func(eps []string) (*cluster.Client, error) {
			c, err := cluster.New(cluster.Config{Endpoints: eps, Timeout: timeout, TLS: src.ClientConfig(""),
				HeartbeatTransport: cfg.HeartbeatTransport, Logger: log.Named("cluster"), Trace: proxytrace.ClusterHook(pc.TracerProvider)})
			if err != nil {
				return nil, startError(err)
			}
			return c, nil
		}
		if len(pc.Clusters) == 0 {
			c, err := newClient(cfg.Cluster)
			if err != nil {
				return nil, err
			}
			cc = c
		}
		for i := range pc.Clusters {
			c, err := newClient(pc.Clusters[i].Endpoints)
			if err != nil {
				return nil, err
			}
			pc.Clusters[i].Client = c
		}
	}
	sc, err := proxy.New(pc, cc)
	if err != nil {
		return nil, startError(err)
	}
	if err := sc.Start(ctx); err != nil {
		return nil, startError(err)
	}
	if src == nil {
		log.Warn("the link to the cluster is PLAIN HTTP (no cluster_tls): for a cluster on loopback only", zap.Strings("cluster", cfg.Endpoints()))
	}
	log.Info("fencepost sidecar started", zap.String("proxy", sc.ProxyAddr()),
		zap.String("control", sc.ControlAddr()), zap.Strings("cluster", cfg.Cluster), zap.String("clusters", cfg.Clusters),
		zap.String("task", cfg.Task), zap.Bool("cluster_tls", src != nil))
	return sc, nil
}

// sidecarSchemeProbe bounds the start-up probe for a TLS/plain mismatch;
// a member that does not answer within it is left to the retry loop.
const sidecarSchemeProbe = time.Second

// checkClusterScheme refuses to start a sidecar that speaks plain HTTP to
// a TLS cluster, or TLS to a plain one: it could only retry forever, with
// an error that names neither. One line says what to pass (exit 2).
func checkClusterScheme(ctx context.Context, cfg *config.Sidecar, src *pki.Source) error {
	var tc *tls.Config
	if src != nil {
		tc = src.ClientConfig("")
	}
	pctx, cancel := context.WithTimeout(ctx, sidecarSchemeProbe)
	defer cancel()
	var me *cluster.MismatchError
	if !errors.As(cluster.ProbeScheme(pctx, cfg.Endpoints(), tc), &me) {
		return nil
	}
	if me.ServerTLS {
		return &classified{kind: config.ErrInvalid, err: fmt.Errorf("cluster member %s speaks TLS and this sidecar plain HTTP: "+
			"pass --cluster-tls-ca-file CA --cluster-tls-cert-file CERT --cluster-tls-key-file KEY (cluster_tls.*): "+
			"the cluster CA and a sidecar certificate (fencepost tls cert create --sidecar --name %s)", me.Endpoint, cfg.WorkerID)}
	}
	return &classified{kind: config.ErrInvalid, err: fmt.Errorf("cluster member %s speaks plain HTTP and this sidecar TLS: "+
		"drop cluster_tls (--cluster-tls-*) or point --cluster at the TLS cluster", me.Endpoint)}
}

// stopSidecar drains within drain_timeout plus a little for giving back.
func stopSidecar(sc *proxy.Sidecar, cfg *config.Sidecar) error {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.DrainTimeout.Std()+cfg.Timeouts.Dial.Std())
	defer cancel()
	return sc.Shutdown(ctx)
}

// sidecarShards maps the clusters key onto proxy's (nil with one
// cluster); Validate has parsed it already.
func sidecarShards(cfg *config.Sidecar) []proxy.ClusterShard {
	specs, _ := cfg.Shards()
	var out []proxy.ClusterShard
	for _, sp := range specs {
		out = append(out, proxy.ClusterShard{Name: sp.Name, Endpoints: sp.Endpoints})
	}
	return out
}

// sidecarConfig maps the sidecar file/env/flag configuration onto proxy's.
func sidecarConfig(cfg *config.Sidecar, log *zap.Logger, reg *prometheus.Registry) proxy.Config {
	pc := proxy.Config{
		Endpoints:          cfg.Cluster,
		Clusters:           sidecarShards(cfg),
		WorkerID:           cfg.WorkerID,
		ProxyAddr:          cfg.ProxyAddr,
		ControlAddr:        cfg.ControlAddr,
		MetricsAddr:        cfg.MetricsAddr,
		Task:               cfg.Task,
		Profile:            cfg.Profile,
		Drift:              cfg.Heartbeat.Drift,
		MarginFloor:        cfg.Heartbeat.MarginFloor.Std(),
		HeartbeatTransport: cfg.HeartbeatTransport,
		ReadsWithoutLease:  proxy.ReadPolicy(cfg.Writes.ReadsWithoutLease),
		ConnectAllow:       cfg.Connect.Allow,
		SignatureHosts:     cfg.SignatureHosts,
		RefuseTargets:      cfg.RefuseTargets,
		MaxRequestBody:     cfg.Limits.MaxRequestBody.Int(),
		MaxResponseBody:    int64(cfg.Limits.MaxResponseBody),
		MaxHeaderBytes:     cfg.Limits.MaxHeaderBytes.Int(),
		DialTimeout:        cfg.Timeouts.Dial.Std(),
		UpstreamTimeout:    cfg.Timeouts.Upstream.Std(),
		IdleTimeout:        cfg.Timeouts.Idle.Std(),
		DrainTimeout:       cfg.DrainTimeout.Std(),
		WritePresets:       cfg.Writes.Presets,
		Capture:            proxy.Capture{Listen: cfg.Capture.Listen, OtherTCP: proxy.OtherTCP(cfg.Capture.OtherTCP)},
		Intercept: proxy.Intercept{Hosts: cfg.Intercept.Hosts, BundleFile: cfg.Intercept.BundleFile,
			UpstreamCAFile: cfg.Intercept.UpstreamCAFile, CAValidity: cfg.Intercept.CAValidity.Std()},
		UpstreamIdleTimeout: cfg.Timeouts.UpstreamIdle.Std(),
		Worker:              cfg.Worker.Tie(),
		Logger:              log,
		Registerer:          reg,
	}
	for _, r := range cfg.Writes.Rules {
		pc.WriteRules = append(pc.WriteRules, proxy.WriteRule{Host: r.Host, PathPrefix: r.PathPrefix, Methods: r.Methods, Write: *r.Write})
	}
	for _, r := range cfg.Writes.Journal {
		pc.Journal = append(pc.Journal, proxy.JournalRule{Host: r.Host, PathPrefix: r.PathPrefix, Methods: r.Methods})
	}
	for _, o := range cfg.TLS.Originate {
		pc.TLSOriginate = append(pc.TLSOriginate, proxy.TLSOrigin{Host: o.Host, ServerName: o.ServerName, CAFile: o.CAFile})
	}
	return pc
}
