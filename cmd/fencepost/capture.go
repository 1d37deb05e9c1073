package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fencepost/fencepost/config"
	"github.com/fencepost/fencepost/proxy/capture"
)

const captureUsage = `Usage: fencepost capture [--remove | --check] [flags]

Closes the bypass: installs nat OUTPUT rules that redirect the worker's
outbound TCP to the sidecar's transparent listener (capture.listen), so a
client that ignores HTTP_PROXY is fenced all the same. Run it once per pod
or network namespace, before the worker starts, with CAP_NET_ADMIN (an init
container). It reads the sidecar's configuration (the same --config file,
FENCEPOST_* variables and flags), of which it uses the capture.* keys and
the cluster's endpoints.

The rules go in their own chain (FENCEPOST_CAPTURE, nat table, jumped to
from OUTPUT), for IPv4 and, when the host has it, IPv6, with the iptables
backend the host uses (nf_tables or legacy, detected; capture.backend
forces one). Every rule carries the comment tag fencepost-capture. Never
redirected: the sidecar's uid (capture.sidecar_uid), loopback, the cluster's
endpoints, capture.exclude_cidrs and capture.exclude_ports. Redirected: all
TCP, or capture.ports. UDP cannot be redirected: UDP to capture.block_udp_ports
(default 443, QUIC) is refused instead (filter table, same chain name), so
clients fall back to TCP. With capture.worker_uid only that uid is captured.
Installing twice leaves one set of rules; with the sidecar down a captured
connection is refused (RST), never passed through.

  --remove  takes every tagged rule and the chain out (nothing there: fine);
            with capture.worker_uid also the rules a killed
            fencepost run --capture left for that uid
  --check   dials a documentation address (192.0.2.1:80, [2001:db8::1]:80)
            as capture.worker_uid (or as this process) and says whether it
            was redirected to the listener; exit 0 only when it was and the
            listener answered

Examples:
  fencepost capture --cluster fencepost-0.fencepost:7400 --capture-listen 127.0.0.1:7483 --capture-sidecar-uid 1337
  fencepost capture --config sidecar.yaml --check
  fencepost capture --remove
`

func init() {
	register(&command{name: "capture", summary: "redirect the worker's outbound TCP to the sidecar (nat rules; needs NET_ADMIN)", usage: captureUsage, run: runCapture})
}

func runCapture(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("capture")
	flags := config.BindFlags(fs, config.RoleSidecar)
	remove := fs.Bool("remove", false, "remove the capture rules instead of installing them")
	check := fs.Bool("check", false, "report whether a connection from the worker's uid is redirected")
	netns := fs.String("netns", "", "act inside this named network namespace (ip netns) instead of this one")
	if code, ok := parseFlags(fs, captureUsage, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(stderr, "capture", "unexpected argument "+fmt.Sprintf("%q", fs.Arg(0)))
	}
	if *remove && *check {
		return usageError(stderr, "capture", "--remove and --check exclude each other")
	}
	install := !*remove && !*check
	cfg, err := config.LoadCapture(config.Source{Env: os.Environ(), Flags: flags}, install)
	if err != nil {
		return reportError(stderr, "capture", err)
	}
	tables, err := capture.Detect(capture.Backend(cfg.Capture.Backend), *netns)
	if err != nil {
		return reportError(stderr, "capture", err)
	}
	plan := cfg.Capture.Plan()
	families := capture.Families()
	switch {
	case *check:
		return captureCheck(ctx, tables, plan, families, stdout)
	case *remove:
		err := tables.Remove(plan, families)
		if plan.WorkerUID > 0 {
			// The rules a fencepost run --capture for that uid left
			// behind (it was killed before it could remove them).
			err = errors.Join(err, tables.Remove(capture.RunPlan(plan, plan.WorkerUID, plan.ListenPort, nil), families))
		}
		if err != nil {
			return reportError(stderr, "capture", err)
		}
		fmt.Fprintf(stdout, "capture rules removed (%s, %s)\n", tables.Backend, familyList(families))
		return exitOK
	}
	if plan, err = installCapture(ctx, tables, cfg, plan, families); err != nil {
		return reportError(stderr, "capture", err)
	}
	n := 0
	for _, f := range families {
		n += len(tables.Installed(plan, f))
	}
	udp := "UDP untouched"
	if len(plan.BlockUDPPorts) > 0 {
		udp = fmt.Sprintf("UDP to %v refused", plan.BlockUDPPorts)
	}
	fmt.Fprintf(stdout, "capture rules installed: %d rules (%s, %s), TCP redirected to port %d, %s, uid %d excluded\n",
		n, tables.Backend, familyList(families), plan.ListenPort, udp, plan.WithDefaults().SidecarUID)
	return exitOK
}

// installCapture installs plan (cfg's capture plan, possibly narrowed to
// one worker uid) with the cluster's endpoints excluded, and returns the
// plan installed; tables.Remove(plan, families) takes it out again. A
// command that captures only its own child (fencepost run --capture) sets
// plan.WorkerUID to the child's uid and calls this before starting it.
func installCapture(ctx context.Context, tables capture.Tables, cfg *config.Sidecar, plan capture.Plan, families []capture.Family) (capture.Plan, error) {
	cidrs, loop, err := clusterExclusions(ctx, cfg.Endpoints())
	if err != nil {
		return plan, err
	}
	plan.ExcludeCIDRs = append(plan.ExcludeCIDRs, cidrs...)
	if plan.Loopback {
		plan.ExcludeDests = append(plan.ExcludeDests, loop...)
	}
	return plan, tables.Install(plan, families)
}

// captureCheck probes each family and prints one line per probe.
func captureCheck(ctx context.Context, tables capture.Tables, plan capture.Plan, families []capture.Family, stdout io.Writer) int {
	uid := -1
	if plan.WorkerUID > 0 {
		uid = plan.WorkerUID
	}
	code := exitOK
	for _, f := range families {
		if len(tables.Installed(plan, f)) == 0 {
			fmt.Fprintf(stdout, "%s: no capture rules installed (run fencepost capture)\n", f)
			code = exitRuntime
			continue
		}
		target := capture.ProbeIPv4
		if f == capture.IPv6 {
			target = capture.ProbeIPv6
		}
		r := tables.Probe(ctx, target, uid, 2*time.Second)
		fmt.Fprintf(stdout, "%s: %s\n", f, r)
		if r.Verdict != capture.Redirected {
			code = exitRuntime
		}
	}
	return code
}

// clusterExclusions resolves the cluster's endpoints to host routes, so
// the worker's own calls to the cluster (fencepost ctl) are not captured,
// and returns the loopback ones apart, with their ports: loopback is not
// captured in a pod, and a local worker's plan (Plan.Loopback) excludes
// just those destinations.
func clusterExclusions(ctx context.Context, endpoints []string) ([]netip.Prefix, []netip.AddrPort, error) {
	var (
		out  []netip.Prefix
		loop []netip.AddrPort
	)
	for _, ep := range endpoints {
		hp := strings.TrimPrefix(strings.TrimPrefix(ep, "https://"), "http://")
		host, portStr, err := net.SplitHostPort(hp)
		if err != nil {
			host = hp
		}
		port, _ := strconv.ParseUint(portStr, 10, 16)
		ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: cluster endpoint %q: cannot resolve it to exclude it from capture: %v", config.ErrRuntime, ep, err)
		}
		for _, ip := range ips {
			if ip = ip.Unmap(); ip.IsLoopback() {
				if port > 0 {
					loop = append(loop, netip.AddrPortFrom(ip, uint16(port)))
				}
				continue
			}
			out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
		}
	}
	return out, loop, nil
}

func familyList(fs []capture.Family) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = string(f)
	}
	return strings.Join(s, "+")
}
