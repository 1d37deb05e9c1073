package main

import (
	"context"
	"io"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/config"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/raftstore"
	"github.com/fencepost/fencepost/raftstore/node"
)

const serverUsage = `Usage: fencepost server [flags]

Runs one node of the lease cluster: a raft member that grants leases, mints
fencing tokens, tracks heartbeats, reclaims overdue tasks and stores
checkpoints, with its HTTP API on http_addr.

The first node bootstraps a new cluster (the default when --join is empty);
the others join through any member. Restarting a node with its data dir
brings back all its state; keep --join set, joining is idempotent.

Examples:
  # a 3-node cluster on one machine
  fencepost server --node-id n1 --data-dir /tmp/fp/n1 --http-addr 127.0.0.1:7400 --raft-addr 127.0.0.1:7401
  fencepost server --node-id n2 --data-dir /tmp/fp/n2 --http-addr 127.0.0.1:7410 --raft-addr 127.0.0.1:7411 --join 127.0.0.1:7400
  fencepost server --node-id n3 --data-dir /tmp/fp/n3 --http-addr 127.0.0.1:7420 --raft-addr 127.0.0.1:7421 --join 127.0.0.1:7400

  fencepost server --config server.yaml

  # start a NEW cluster from a backup ('fencepost ctl snapshot save'); the
  # data dir must be empty; the others then join it with empty data dirs
  fencepost server --node-id r1 --data-dir /var/lib/fencepost --restore fp.backup

Restoring: every lease of the old cluster is expired and every session
closed (sidecars open new ones), and the new log starts above the backup's
index plus --restore-epoch-margin (default: the larger of 1e9 and the
backup's age in seconds x 1e6), so every epoch the restored cluster grants
is above every epoch the old one could have granted after the backup.
What the old cluster did after the backup is lost (README: Backup and
restore).
`

func init() {
	register(&command{name: "server", summary: "run one node of the lease cluster", usage: serverUsage, run: runServer})
}

func runServer(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("server")
	flags := config.BindFlags(fs, config.RoleServer)
	var restore raftstore.Restore
	fs.StringVar(&restore.File, "restore", "", "start a new cluster from this backup file (from 'fencepost ctl snapshot save'); the data dir must hold no raft state")
	fs.Uint64Var(&restore.EpochMargin, "restore-epoch-margin", 0, "with --restore: start the new log this many indexes above the backup's (0: sized from the backup's age)")
	if code, ok := parseFlags(fs, serverUsage, args, stdout, stderr); !ok {
		return code
	}
	if restore.File == "" && restore.EpochMargin != 0 {
		return usageError(stderr, "server", "--restore-epoch-margin needs --restore")
	}
	if restore.File != "" {
		if _, err := raftstore.VerifyBackup(restore.File); err != nil {
			return usageError(stderr, "server", "--restore: "+strings.TrimPrefix(err.Error(), raftstore.ErrBackup.Error()+": "))
		}
	}
	cfg, code := loadRole[*config.Server](config.RoleServer, flags, "server", stderr)
	if code != exitOK {
		return code
	}
	log, err := newLogger(cfg.Log, stderr)
	if err != nil {
		return reportError(stderr, "server", err)
	}
	defer func() { _ = log.Sync() }()
	reg := newRegistry()
	ncfg, err := nodeConfig(cfg, log, reg)
	if err != nil {
		return reportError(stderr, "server", startError(err))
	}
	ncfg.Store.Restore = restore
	traces, stopTraces, err := startTracing(cfg.Tracing, stdout, log)
	if err != nil {
		return reportError(stderr, "server", startError(err))
	}
	defer stopTraces()
	ncfg.HTTP.TracerProvider = traces.Provider("server")
	n, err := node.Start(ncfg)
	if err != nil {
		return reportError(stderr, "server", startError(err))
	}
	log.Info("fencepost server started", zap.String("node_id", cfg.NodeID),
		zap.String("http", n.HTTP.Addr()), zap.String("raft", n.Store.RaftAddr()),
		zap.Bool("bootstrap", *cfg.Bootstrap), zap.Strings("join", cfg.Join), zap.Bool("tls", ncfg.Store.TLS != nil))
	<-ctx.Done()
	log.Info("shutting down")
	if err := n.Close(); err != nil {
		return reportError(stderr, "server", err)
	}
	log.Info("stopped")
	return exitOK
}

// newRegistry returns a Prometheus registry with the Go runtime and process
// collectors, which every role serves beside its own metrics.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// nodeConfig maps the server file/env/flag configuration onto the node's
// package configurations.
func nodeConfig(cfg *config.Server, log *zap.Logger, reg *prometheus.Registry) (node.Config, error) {
	key, err := cfg.Signing.LoadKey()
	if err != nil {
		return node.Config{}, err
	}
	src, err := cfg.TLS.Source("tls")
	if err != nil {
		return node.Config{}, err
	}
	profiles := make(map[string]raftstore.Profile, len(cfg.Leases.Profiles))
	for name, p := range cfg.Leases.Profiles {
		profiles[name] = raftstore.Profile{TTL: p.TTL.Std(), Heartbeat: p.Heartbeat.Std(), ProgressTimeout: p.ProgressTimeout.Std()}
	}
	var nc node.Config
	nc.Logger = log
	nc.Join = cfg.Join
	nc.HTTP.Addr = cfg.HTTPAddr
	nc.HTTP.Gatherer = reg
	nc.HTTP.Pprof = cfg.Pprof
	nc.HTTP.BodyReaders = cfg.BodyReaders
	nc.HTTP.RatePerIdentity, nc.HTTP.RateBurst = rate(cfg.Leases.Quota)
	nc.Store = raftstore.Config{
		NodeID:             cfg.NodeID,
		DataDir:            cfg.DataDir,
		RaftAddr:           cfg.RaftAddr,
		RaftAdvertise:      cfg.RaftAdvertise,
		HTTPAddr:           cfg.HTTPAdvertise,
		Bootstrap:          *cfg.Bootstrap,
		HeartbeatTimeout:   cfg.Raft.HeartbeatTimeout.Std(),
		ElectionTimeout:    cfg.Raft.ElectionTimeout.Std(),
		LeaderLeaseTimeout: cfg.Raft.LeaderLeaseTimeout.Std(),
		CommitTimeout:      cfg.Raft.CommitTimeout.Std(),
		SnapshotInterval:   cfg.Raft.SnapshotInterval.Std(),
		SnapshotThreshold:  cfg.Raft.SnapshotThreshold,
		MixedVersions:      cfg.Raft.MixedVersions,
		TrailingLogs:       cfg.Raft.TrailingLogs,
		Profiles:           profiles,
		DefaultProfile:     cfg.Leases.DefaultProfile,
		Grace:              cfg.Leases.Grace.Std(),
		MinTTL:             cfg.Leases.MinTTL.Std(),
		MaxTTL:             cfg.Leases.MaxTTL.Std(),
		CheckpointMaxBytes: cfg.Leases.CheckpointMaxBytes.Int(),
		MaxTaskIDBytes:     cfg.Leases.MaxTaskIDBytes,
		Quota:              quota(cfg.Leases.Quota),
		SigningKey:         key,
		TLS:                src,
		Registerer:         reg,
		Logger:             log,
		Version:            version,
	}
	return nc, nc.Store.Validate()
}

// rate maps the configured per-identity request rate onto the API
// server's, where, as in the store, 0 takes the default and a negative
// value is unlimited.
func rate(q config.Quota) (perSecond, burst int) {
	if q.RequestsPerSecond == 0 {
		return -1, -1
	}
	return q.RequestsPerSecond, q.RequestBurst
}

// quota maps the configured per-identity quota onto the store's: the
// file's 0 (unlimited) is the store's negative, since the store gives a
// zero Quota its defaults.
func quota(q config.Quota) lease.Quota {
	unlimited := func(v int64) int64 {
		if v == 0 {
			return -1
		}
		return v
	}
	return lease.Quota{Sessions: int(unlimited(int64(q.Sessions))), Tasks: int(unlimited(int64(q.Tasks))),
		Bytes: unlimited(int64(q.Bytes)), TotalBytes: unlimited(int64(q.ClusterBytes))}
}
