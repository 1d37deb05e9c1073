package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/fencepost/fencepost/config"
	"github.com/fencepost/fencepost/fence/pki"
	"github.com/fencepost/fencepost/proxy"
	"github.com/fencepost/fencepost/raftstore/node"
)

const devUsage = `Usage: fencepost dev [flags]

Runs the embedded default on loopback, in one process, with no external
services: a one-node lease cluster (its data kept in data_dir across
restarts), a sidecar holding the task dev-task, the reference fenced
service and the operator console (ports.console, 7470). It prints what
to export for a worker and a fenced call to try.
Ctrl-C stops everything; the sidecar gives its lease back first.

Examples:
  fencepost dev
  fencepost dev --data-dir /tmp/fp-dev --ports-proxy 8480
  fencepost dev --trace-console        # print every span as a JSON line
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
	// One exporter for the process; each part is its own service, so a
	// trace shows the hops. Flushed after every part has stopped.
	traces, stopTraces, err := startTracing(cfg.Tracing, stdout, log)
	if err != nil {
		return startError(err)
	}
	defer stopTraces()
	scfg := cfg.Server()
	sccfg := cfg.Sidecar()
	// The cluster signs only with a key file its members hold (the key
	// never enters the log), and dev speaks TLS like a real cluster: both
	// come from devSecrets, beside the data directory, unless configured.
	// Absolute, so the certificate paths the banner prints work from any
	// directory, not only the one dev was started in.
	tlsDir, err := filepath.Abs(cfg.DataDir + "-tls")
	if err != nil {
		return fmt.Errorf("%w: data_dir: %w", config.ErrRuntime, err)
	}
	sec, err := devSecrets(tlsDir, sccfg.WorkerID)
	if err != nil {
		return fmt.Errorf("%w: dev certificates: %w", config.ErrRuntime, err)
	}
	scfg.TLS = sec.member
	if scfg.Signing.KeyFile == "" {
		scfg.Signing.KeyFile = sec.signingKey
	}
	ncfg, err := nodeConfig(scfg, log.Named("cluster"), newRegistry())
	if err != nil {
		return startError(err)
	}
	ncfg.HTTP.TracerProvider = traces.Provider("server")
	n, err := node.Start(ncfg)
	if err != nil {
		return startError(err)
	}
	defer func() { err = errors.Join(err, n.Close()) }()
	clusterAddr := n.HTTP.Addr()

	fcfg := cfg.Fenced()
	fcfg.KeysFrom, fcfg.KeysCAFile = "https://"+clusterAddr, sec.member.CAFile
	fenced, err := startFenced(ctx, fcfg, log.Named("fenced"), newRegistry(), traces.Provider("fenced"))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, fenced.Close()) }()

	sccfg.Cluster, sccfg.ClusterTLS = []string{clusterAddr}, sec.sidecar
	// The node's raft port is on this machine too: never a proxy target.
	sccfg.RefuseTargets = append(sccfg.RefuseTargets, n.Store.RaftListenAddr())
	if sccfg.Intercept.BundleFile, err = filepath.Abs(sccfg.Intercept.BundleFile); err != nil {
		return fmt.Errorf("%w: data_dir: %w", config.ErrRuntime, err)
	}
	sccfg.Intercept.UpstreamCAFile = filepath.Join(filepath.Dir(sccfg.Intercept.BundleFile), "upstream-ca-bundle.pem")
	fencedTLS, err := startFencedTLS(fenced.Handler(), net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Ports.FencedTLS)), sccfg.Intercept.UpstreamCAFile)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, fencedTLS.Close()) }()
	// Only the fenced service gets the token's signature, plain and over
	// TLS, under both names a worker may call it by, and the hosts the
	// user named for a validator of their own (signature_hosts).
	sccfg.SignatureHosts = append([]string{fenced.Addr(), strings.TrimPrefix(fencedURL(fenced.Addr()), "http://"),
		fencedTLS.Addr(), strings.TrimPrefix(fencedURL(fencedTLS.Addr()), "http://")}, cfg.SignatureHosts...)
	sc, err := startSidecar(ctx, sccfg, log.Named("sidecar"), newRegistry(), traces.Provider("sidecar"))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stopSidecar(sc, sccfg)) }()
	con, err := startDevConsole(net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Ports.Console)), clusterAddr, sec.operator,
		[]string{"http://" + sc.ControlAddr() + "/metrics", "http://" + fenced.Addr() + "/metrics"}, "http://"+fenced.Addr()+"/v1/log", cfg.ConsoleTraceURL, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, con.Close()) }()

	if cfg.Task != "" && !waitHeld(ctx, sc, cfg.Task, devLeaseWait) {
		log.Warn("the sidecar does not hold the task yet; writes get 409 no-lease until it does", zap.String("task", cfg.Task))
	}
	self, err := selfCommand(cfg.DataDir)
	if err != nil {
		log.Warn("the printed ctl line assumes fencepost is on PATH", zap.Error(err))
		self, err = "fencepost", nil
	}
	printDevHelp(stdout, devHelp{ctl: devCtl(self, clusterAddr, sec.operator), cluster: clusterAddr, proxy: sc.ProxyAddr(), control: sc.ControlAddr(),
		fenced: fencedURL(fenced.Addr()), task: cfg.Task, certDir: tlsDir, caFile: sec.operator.CAFile, extraSigned: cfg.SignatureHosts, console: con.URL()})
	revoke := devCtl(self, clusterAddr, sec.operator) + " tasks revoke " + cfg.Task
	printDevHTTPS(stdout, revoke, sc.ProxyAddr(), "https"+strings.TrimPrefix(fencedURL(fencedTLS.Addr()), "http"), sccfg.Intercept.BundleFile, cfg.Task)
	<-ctx.Done()
	fmt.Fprintln(stdout, "\nfencepost dev: stopping...")
	return nil
}

// devLeaseWait bounds how long dev waits for its sidecar to hold the task
// before printing the banner, whose first suggested write needs the lease.
const devLeaseWait = 15 * time.Second

// waitHeld polls until sc holds a current lease on task, for up to wait.
func waitHeld(ctx context.Context, sc *proxy.Sidecar, task string, wait time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		for _, l := range sc.Leases() {
			if l.TaskID == task && l.Current {
				return true
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// devFencedHost is the name the banner gives the fenced service. Go's
// net/http never proxies "localhost" or a loopback IP, so a Go worker
// calling 127.0.0.1 would bypass the sidecar; a name under .localhost is
// proxied by every common client, and the sidecar dials it on loopback.
const devFencedHost = "fenced.localhost"

// fencedURL is the fenced service's URL through devFencedHost.
func fencedURL(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	return "http://" + net.JoinHostPort(devFencedHost, port)
}

// devCtl is the start of a ctl command line against dev's cluster as its
// operator: the binary (selfCommand) and every file by absolute path, shell
// quoted, so it works as printed from any directory.
func devCtl(self, cluster string, op config.CertFiles) string {
	return fmt.Sprintf("%s ctl --cluster %s --ca %s --cert %s --key %s",
		self, cluster, shellQuote(op.CAFile), shellQuote(op.CertFile), shellQuote(op.KeyFile))
}

// devHelp is what the dev banner names.
type devHelp struct {
	ctl     string // devCtl: how to run ctl as dev's operator from any shell
	cluster string // cluster API host:port
	proxy   string // sidecar proxy host:port
	control string // sidecar control API host:port
	fenced  string // fenced service URL, through devFencedHost
	task    string // the task the sidecar holds
	certDir string // where dev's certificates are (absolute)
	caFile  string // the cluster CA (absolute), to fetch /v1/keys over TLS

	extraSigned []string // the user's signature_hosts
	console     string   // the operator console's URL
}

// signedNow lists the user's hosts that get signatures.
func signedNow(hosts []string) string {
	if len(hosts) == 0 {
		return "none of yours"
	}
	return strings.Join(hosts, ", ")
}

// printDevHelp prints the banner: every command in it works as printed in
// any shell, and the export lines send a worker's tool calls through the
// sidecar from each client the README's table lists.
func printDevHelp(w io.Writer, h devHelp) {
	controlHost, _, _ := net.SplitHostPort(h.control)
	fmt.Fprintf(w, `
fencepost dev is running (Ctrl-C to stop)

  cluster API      https://%[2]s       (GET /v1/cluster, /v1/tasks, /metrics; TLS, certificates in %[8]s)
  sidecar proxy    http://%[3]s        (the worker's HTTP_PROXY)
  sidecar control  http://%[4]s        (GET /v1/lease, /v1/events, /metrics)
  fenced service   %[5]s   (GET /v1/log)
  task held        %[6]s
  console          %[11]s   (tasks, timelines, workers, health; as the dev operator)

In the worker's shell:

  export HTTP_PROXY=http://%[3]s http_proxy=http://%[3]s NO_PROXY=%[7]s no_proxy=%[7]s
  export NODE_USE_ENV_PROXY=1   # Node.js 24 reads the proxy variables only with this

  Tool calls to %[5]s go through the sidecar from curl, Go, Python
  and Node alike (the sidecar dials *.localhost names on 127.0.0.1 itself).
  Calls to %[7]s skip it: that is how the worker reaches the control API.
  (Go never proxies localhost or 127.0.0.1, whatever NO_PROXY says.)

Try a fenced call (arrives stamped with X-Fencing-Token):

  curl -s -x http://%[3]s -X POST %[5]s/v1/tasks/%[6]s/writes -d 'step 1'

Take the lease away, then try again (409 from the sidecar; nothing reaches the service):

  %[1]s tasks revoke %[6]s
  curl -s -x http://%[3]s -X POST %[5]s/v1/tasks/%[6]s/writes -d 'step 2'

Take the lease back (a new owner: a higher epoch) and write on. A write's Idempotency-Key
comes from (task, checkpoint, write number), never from the epoch, so a new owner repeating
a step is replayed, not run twice; a different write in the same place is refused with
422 write-already-performed. Name each action, and it gets a key of its own:

  curl -s -X POST http://%[4]s/v1/acquire -H 'Content-Type: application/json' -d '{"taskId":"%[6]s"}'
  curl -s -x http://%[3]s -X POST %[5]s/v1/tasks/%[6]s/writes -H 'X-Fencing-Action-Id: step-3' -d 'step 3'

Your own service behind a fence validator gets the token's signature only when dev
names it (signed for now: %[10]s):

  fencepost dev --signature-hosts HOST:PORT[,HOST:PORT...]
  keys for its validator: https://%[2]s/v1/keys   CA: %[9]s

`, h.ctl, h.cluster, h.proxy, h.control, h.fenced, h.task, controlHost, shellQuote(h.certDir),
		shellQuote(h.caFile), signedNow(h.extraSigned), h.console)
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
