package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"go.uber.org/zap"

	"github.com/fencepost/fencepost/config"
	"github.com/fencepost/fencepost/proxy/capture"
	"github.com/fencepost/fencepost/proxy/workertie"
)

const runUsage = `Usage: fencepost run [sidecar flags] -- CMD [ARGS...]

Runs the sidecar and starts the worker as its child, so the worker's life is
its leases' (README "When the worker dies or hangs"):

  - the child gets the worker's environment: FENCEPOST_CONTROL_URL,
    FENCEPOST_TASK, FENCEPOST_EPOCH, FENCEPOST_CHECKPOINT (the handed-over
    checkpoint, JSON), HTTP_PROXY/HTTPS_PROXY/NO_PROXY in both cases, the CA
    bundle variables (SSL_CERT_FILE, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE,
    NODE_EXTRA_CA_CERTS) and NODE_USE_ENV_PROXY=1;
  - when it exits its leases end at once: exit 0 completes them
    (worker.on_success: give_back gives them back), any other exit or a
    signal gives them back with reason worker_exited, so the task is
    claimable within a second instead of after TTL + grace;
  - when a lease is lost (revoked, expired, taken over) the child gets
    SIGTERM and, after worker.kill_grace, SIGKILL (worker.on_lost: none
    leaves it running, its writes blocked);
  - with worker.restart: on-failure a crashed child is started again after a
    backoff, under a new grant (a higher epoch) and the latest checkpoint;
  - signals sent to fencepost run go to the child, and fencepost run exits
    with the child's exit code (128 + n for signal n).

Every sidecar flag applies (fencepost sidecar --help); with --task the
sidecar acquires the task before it starts the child.

With --capture (root, CAP_NET_ADMIN) the child runs under a uid of its own
(--capture-uid, else capture.worker_uid, else 1338) and nat rules for that
uid alone (chain FPRUN_<uid>, tag fencepost-run-<uid>) send its outbound
TCP, loopback included, to the sidecar's transparent listener, so a child
that ignores HTTP_PROXY is fenced all the same (README "Closing the
bypass"). The sidecar's own ports, the cluster's endpoints and DNS stay
direct; no other process is captured. The rules go when the run ends,
however it ends; a run killed with SIGKILL leaves them, and
fencepost capture --remove --capture-worker-uid <uid> takes them out.

Examples:
  fencepost run --cluster 127.0.0.1:7400 --task t1 -- python agent.py
  fencepost run --config sidecar.yaml --worker-restart on-failure -- ./worker --fast
  sudo fencepost run --cluster 127.0.0.1:7400 --task t1 --capture -- python agent.py
`

func init() {
	register(&command{name: "run", summary: "run a worker as the sidecar's child: its exit ends its leases", usage: runUsage, run: runRun})
}

// runSignals are forwarded to the child; the first four also end the run.
var runSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	sidecarArgs, argv := args, []string(nil)
	if i := slices.Index(args, "--"); i >= 0 {
		sidecarArgs, argv = args[:i], args[i+1:]
	}
	fs := newFlagSet("run")
	flags := config.BindFlags(fs, config.RoleSidecar)
	captured := fs.Bool("capture", false, "capture the child's outbound TCP: it runs under its own uid, whose connections nat rules send to the sidecar (needs root; run_capture.go)")
	captureUID := fs.Int("capture-uid", -1, fmt.Sprintf("with --capture: the child's uid (default capture.worker_uid when set, else %d)", capture.DefaultRunWorkerUID))
	if code, ok := parseFlags(fs, runUsage, sidecarArgs, stdout, stderr); !ok {
		return code
	}
	if len(argv) == 0 || argv[0] == "" {
		return usageError(stderr, "run", "give the worker's command after --, e.g. fencepost run --task t1 -- python agent.py")
	}
	if *captureUID >= 0 && !*captured {
		return usageError(stderr, "run", "--capture-uid applies only with --capture")
	}
	if *captured {
		// First: without the privilege nothing else matters.
		if err := capture.CheckPrivileges(); err != nil {
			return usageError(stderr, "run", "--capture: "+err.Error())
		}
	}
	cfg, code := loadRole[*config.Sidecar](config.RoleSidecar, flags, "run", stderr)
	if code != exitOK {
		return code
	}
	log, err := newLogger(cfg.Log, stderr)
	if err != nil {
		return reportError(stderr, "run", err)
	}
	defer func() { _ = log.Sync() }()
	var cc *childCapture
	if *captured {
		if cc, err = prepareRunCapture(cfg, *captureUID, log.Named("capture")); err != nil {
			return usageError(stderr, "run", err.Error())
		}
	}
	// Signals go to the child, not to this process's shutdown: the run
	// ends when the child does. (The command's ctx still ends it when the
	// caller cancels it, in tests.)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, runSignals...)
	defer signal.Stop(sigs)

	traces, stopTraces, err := startTracing(cfg.Tracing, stdout, log)
	if err != nil {
		return reportError(stderr, "run", startError(err))
	}
	defer stopTraces()
	sc, err := startSidecar(context.WithoutCancel(ctx), cfg, log, newRegistry(), traces.Provider("sidecar"))
	if err != nil {
		return reportError(stderr, "run", err)
	}
	if cc != nil {
		// Deferred first, so it runs last: after the child has exited and
		// the sidecar (its listener) stopped, on every path out.
		defer cc.remove()
		if err := cc.install(ctx, cfg, sc); err != nil {
			if serr := stopSidecar(sc, cfg); serr != nil {
				log.Warn("stopping the sidecar", zap.Error(serr))
			}
			return reportError(stderr, "run", err)
		}
	}
	sup := &workertie.Supervisor{
		Config: cfg.Worker.Tie(), Keeper: sc.WorkerKeeper(), Argv: argv, Env: sc.WorkerEnv,
		Signals: sigs, Stdin: os.Stdin, Stdout: stdout, Stderr: stderr, Log: log.Named("run"),
	}
	if cc != nil {
		sup.Credential = cc.cred
	}
	childCode, runErr := sup.Run(ctx)
	if runErr != nil {
		log.Error("worker", zap.Error(runErr))
	}
	if err := stopSidecar(sc, cfg); err != nil {
		log.Warn("stopping the sidecar", zap.Error(err))
	}
	return childCode
}
