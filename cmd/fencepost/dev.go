package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/fencepost/fencepost/config"
	"github.com/fencepost/fencepost/fence/pki"
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
	sccfg := cfg.Sidecar()
	sec, err := devSecrets(cfg.DataDir+"-tls", sccfg.WorkerID)
	if err != nil {
		return fmt.Errorf("%w: dev certificates: %w", config.ErrRuntime, err)
	}
	scfg.TLS, scfg.Signing.KeyFile = sec.member, sec.signingKey
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
	fcfg.KeysFrom, fcfg.KeysCAFile = "https://"+clusterAddr, sec.member.CAFile
	fenced, err := startFenced(ctx, fcfg, log.Named("fenced"), newRegistry())
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, fenced.Close()) }()

	sccfg.Cluster, sccfg.ClusterTLS = []string{clusterAddr}, sec.sidecar
	sc, err := startSidecar(ctx, sccfg, log.Named("sidecar"), newRegistry())
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stopSidecar(sc, sccfg)) }()

	printDevHelp(stdout, clusterAddr, sc.ProxyAddr(), sc.ControlAddr(), fenced.Addr(), cfg.Task, sec.operator)
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

func printDevHelp(w io.Writer, cluster, proxyAddr, control, fenced, task string, op config.CertFiles) {
	fmt.Fprintf(w, `
fencepost dev is running (Ctrl-C to stop)

  cluster API      https://%[1]s       (GET /v1/cluster, /v1/tasks, /metrics; TLS, certificates in %[7]s)
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

  export FENCEPOST_CA_FILE=%[8]s FENCEPOST_CERT_FILE=%[9]s FENCEPOST_KEY_FILE=%[10]s
  fencepost ctl --cluster %[1]s tasks revoke %[5]s
  curl -s -x http://%[2]s -X POST http://%[4]s/v1/tasks/%[5]s/writes -d 'step 2'

`, cluster, proxyAddr, control, fenced, task, portOf(control), filepath.Dir(op.CAFile), op.CAFile, op.CertFile, op.KeyFile)
}

// devIdentities are the certificates `fencepost dev` runs with.
type devIdentities struct {
	member, sidecar, operator config.CertFiles
	signingKey                string
}

// devSecrets makes dir hold a CA, the node's, the sidecar's and an
// operator's certificates and a signing key, creating what is missing, so
// dev runs with TLS like a real cluster and still starts in one command.
// dir sits beside the data directory, not in it: the node's data alone
// cannot forge tokens, in dev as in production.
func devSecrets(dir, worker string) (devIdentities, error) {
	loop := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	long := pki.DefaultCertValidity
	member := pki.Request{Name: "dev", Role: pki.RoleMember, DNSNames: []string{"localhost"}, IPs: loop, Validity: long}
	sidecar := pki.Request{Name: worker, Role: pki.RoleSidecar, Validity: long}
	operator := pki.Request{Name: "dev-operator", Role: pki.RoleOperator, Validity: long}
	ids, err := pki.EnsureLocal(dir, []pki.Request{member, sidecar, operator}, time.Now())
	if err != nil {
		return devIdentities{}, err
	}
	files := func(r pki.Request) config.CertFiles {
		f := ids[pki.Identity{Name: r.Name, Role: r.Role}]
		return config.CertFiles{CAFile: f.CA, CertFile: f.Cert, KeyFile: f.Key}
	}
	key := filepath.Join(dir, signingKeyFile)
	if _, err := os.Stat(key); errors.Is(err, os.ErrNotExist) {
		if _, err := writeSigningKey(dir); err != nil {
			return devIdentities{}, err
		}
	}
	return devIdentities{member: files(member), sidecar: files(sidecar), operator: files(operator), signingKey: key}, nil
}
