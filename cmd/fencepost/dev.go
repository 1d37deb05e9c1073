package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"

	"go.uber.org/zap"

	"github.com/fencepost/fencepost/config"
	"github.com/fencepost/fencepost/raftstore/node"
)

const devUsage = `Usage: fencepost dev [flags]

Runs the embedded default on loopback, in one process, with no external
services: a one-node lease cluster (its data kept in data_dir across
restarts), a sidecar holding the task dev-task, and the reference fenced
service. It prints what to export for a worker and a fenced call to try.
Ctrl-C stops everything; the sidecar gives its lease back first.

Examples:
  fencepost dev
  fencepost dev --data-dir /tmp/fp-dev --ports-proxy 8480
`

func init() {
	register(&command{name: "dev", summary: "run cluster + sidecar + fenced service on loopback (the embedded default)", usage: devUsage, run: runDev})
}

func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("dev")
	flags := config.BindFlags(fs, config.RoleDev)
	if code, ok := parseFlags(fs, devUsage, args, stdout, stderr); !ok {
		return code
	}
	cfg, code := loadRole[*config.Dev](config.RoleDev, flags, "dev", stderr)
	if code != exitOK {
		return code
	}
	log, err := newLogger(cfg.Log, stderr)
	if err != nil {
		return reportError(stderr, "dev", err)
	}
	defer func() { _ = log.Sync() }()
	if err := serveDev(ctx, cfg, log, stdout); err != nil {
		return reportError(stderr, "dev", err)
	}
	fmt.Fprintln(stdout, "fencepost dev: stopped cleanly (lease given back, node closed).")
	return exitOK
}

// serveDev starts the three parts in dependency order, prints the
// instructions, waits for ctx and stops them in reverse order.
func serveDev(ctx context.Context, cfg *config.Dev, log *zap.Logger, stdout io.Writer) (err error) {
	scfg := cfg.Server()
	ncfg, err := nodeConfig(scfg, log.Named("cluster"), newRegistry())
	if err != nil {
		return err
	}
	n, err := node.Start(ncfg)
	if err != nil {
		return fmt.Errorf("%w: %w", config.ErrRuntime, err)
	}
	defer func() { err = errors.Join(err, n.Close()) }()
	clusterAddr := n.HTTP.Addr()

	fcfg := cfg.Fenced()
	fcfg.KeysFrom = "http://" + clusterAddr
	fenced, err := startFenced(ctx, fcfg, log.Named("fenced"), newRegistry())
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, fenced.Close()) }()

	sccfg := cfg.Sidecar()
	sccfg.Cluster = []string{clusterAddr}
	if sccfg.Intercept.BundleFile, err = filepath.Abs(sccfg.Intercept.BundleFile); err != nil {
		return fmt.Errorf("%w: data_dir: %w", config.ErrRuntime, err)
	}
	sccfg.Intercept.UpstreamCAFile = filepath.Join(filepath.Dir(sccfg.Intercept.BundleFile), "upstream-ca-bundle.pem")
	fencedTLS, err := startFencedTLS(fenced.Handler(), net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Ports.FencedTLS)), sccfg.Intercept.UpstreamCAFile)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, fencedTLS.Close()) }()
	sc, err := startSidecar(ctx, sccfg, log.Named("sidecar"), newRegistry())
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stopSidecar(sc, sccfg)) }()

	printDevHelp(stdout, clusterAddr, sc.ProxyAddr(), sc.ControlAddr(), fenced.Addr(), cfg.Task)
	printDevHTTPS(stdout, sc.ProxyAddr(), fencedTLS.Addr(), sccfg.Intercept.BundleFile, cfg.Task, clusterAddr)
	<-ctx.Done()
	fmt.Fprintln(stdout, "\nfencepost dev: stopping...")
	return nil
}

func portOf(addr string) string {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return p
}

func printDevHelp(w io.Writer, cluster, proxyAddr, control, fenced, task string) {
	fmt.Fprintf(w, `
fencepost dev is running (Ctrl-C to stop)

  cluster API      http://%[1]s        (GET /v1/cluster, /v1/tasks, /metrics)
  sidecar proxy    http://%[2]s        (the worker's HTTP_PROXY)
  sidecar control  http://%[3]s        (GET /v1/lease, /v1/events, /metrics)
  fenced service   http://%[4]s        (GET /v1/log)
  task held        %[5]s

In the worker's shell:

  export HTTP_PROXY=http://%[2]s http_proxy=http://%[2]s NO_PROXY=localhost no_proxy=localhost

  (Everything here is on 127.0.0.1, so NO_PROXY names only "localhost": call the
  sidecar's control API as http://localhost:%[6]s so it bypasses the proxy, while
  tool calls to 127.0.0.1 go through it.)

Try a fenced call (arrives stamped with X-Fencing-Token):

  curl -s -x http://%[2]s -X POST http://%[4]s/v1/tasks/%[5]s/writes -d 'step 1'

Take the lease away, then try again (409 from the sidecar; nothing reaches the service):

  fencepost ctl --cluster %[1]s tasks revoke %[5]s
  curl -s -x http://%[2]s -X POST http://%[4]s/v1/tasks/%[5]s/writes -d 'step 2'

`, cluster, proxyAddr, control, fenced, task, portOf(control))
}
