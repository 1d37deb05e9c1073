package main

import (
	"fmt"
	"os/exec"
	"regexp"
	"syscall"
	"time"
)

// harness holds one run's state: what is running and where.
type harness struct {
	plan Plan
	res  *Results
	root string // the repository root
	dir  string // the run's temporary directory
	only map[string]bool
	ps   ports

	prebuilt string // --fencepost: a binary to use instead of building one

	fpBin string
	fp    *fpCluster
	etcd  *etcdCluster
	lb    *leaseBench
}

// want reports whether workload n is selected.
func (h *harness) want(n string) bool { return h.only == nil || h.only[n] }

// skip records that a part of the run could not be measured, and why.
func (h *harness) skip(what string, err error) {
	msg := fmt.Sprintf("%s: %v", what, err)
	h.res.Skipped = append(h.res.Skipped, msg)
	logf("SKIPPED %s", msg)
}

// run does the whole benchmark. Missing fencepost parts (a subcommand not
// wired yet) are skipped and reported; the peers' side still runs so the
// machinery is exercised.
func (h *harness) run() error {
	if err := installPeers(); err != nil {
		return err
	}
	h.res.Machine = describeMachine()
	logf("machine: %d CPUs, %s, %d MiB, load %s", h.res.Machine.CPUs, h.res.Machine.CPUModel, h.res.Machine.MemoryMiB, h.res.Machine.LoadAvg)
	bin, err := h.prebuilt, error(nil)
	h.res.Machine.Built = "the prebuilt binary " + bin
	if bin == "" {
		bin, h.res.Machine.Built, err = buildFencepost(h.root, h.dir)
	}
	logf("fencepost: %s", h.res.Machine.Built)
	switch {
	case err != nil:
		h.skip("fencepost build", err)
	case !hasSubcommand(bin, "server"):
		h.skip("fencepost cluster", fmt.Errorf("the binary has no server subcommand yet"))
	default:
		h.fpBin = bin
		if h.fp, err = startFPCluster(bin, h.dir, &h.ps); err != nil {
			h.skip("fencepost cluster", err)
			h.fp = nil
		}
	}
	if h.etcd, err = startEtcdCluster(binPath("etcd"), h.dir+"/etcd-default", "etcd", &h.ps, 100*time.Millisecond, time.Second); err != nil {
		return fmt.Errorf("etcd cluster: %w", err)
	}
	logf("clusters up (fencepost: %v, etcd: yes)", h.fp != nil)
	if err := h.leaseWorkloads(); err != nil {
		return err
	}
	if h.want("4") {
		h.failover()
	}
	if h.want("5") {
		h.proxies()
	}
	if h.want("6") {
		h.memory()
	}
	if h.want("7") {
		h.https()
	}
	if h.lb.fpSess != nil {
		h.lb.fpSess.close()
	}
	return nil
}

// stop stops both clusters by PID.
func (h *harness) stop() {
	if h.fp != nil {
		h.fp.stop()
	}
	if h.etcd != nil {
		h.etcd.stop()
	}
}

// leaders refreshes both leader addresses (the failover workload moves
// them).
func (h *harness) leaders() error {
	h.lb.fpAddr = ""
	if h.fp != nil {
		addr, err := h.fp.leaderAddr()
		if err != nil {
			return err
		}
		h.lb.fpAddr = addr
	}
	url, err := h.etcd.leaderURL()
	h.lb.etcd = url
	return err
}

// leaseWorkloads runs workloads 1–3.
func (h *harness) leaseWorkloads() error {
	h.lb = &leaseBench{plan: h.plan, res: h.res, etcdPids: h.etcd.pids, fpPids: func() []int { return nil }}
	if h.fp != nil {
		h.lb.fpPids, h.lb.fpLeader = h.fp.pids, h.fp.leaderAddr
	}
	if err := h.leaders(); err != nil {
		return err
	}
	if h.fp != nil {
		var cls []*fpClient
		for _, e := range h.fp.endpoints() {
			cls = append(cls, newFPClient(e, 4, 2*time.Second))
		}
		pool, err := newSessionPool(append([]*fpClient{newFPClient(h.lb.fpAddr, 4, opTimeout)}, cls...), 64, "pool")
		if err != nil {
			h.skip("fencepost sessions", err)
			h.lb.fpAddr = ""
		} else {
			h.lb.fpSess = pool
		}
	}
	if h.want("1") {
		h.lb.acquireRelease()
	}
	if h.want("2") {
		if err := h.lb.heartbeats(); err != nil {
			h.skip(wlHeartbeat, err)
		}
	}
	if h.want("3") {
		h.lb.checkpoints()
	}
	return nil
}

// failover runs workload 4 on fencepost (its defaults), etcd at its
// defaults, and etcd at fencepost's election timeout.
func (h *harness) failover() {
	fpHB, fpEl := fpRaftTimeouts(h.fpBin)
	tunedHB := max(10*time.Millisecond, fpEl/6)
	tuned, err := startEtcdCluster(binPath("etcd"), h.dir+"/etcd-tuned", fmt.Sprintf("etcd %d/%d ms", tunedHB.Milliseconds(), fpEl.Milliseconds()), &h.ps, tunedHB, fpEl)
	if err != nil {
		h.skip("etcd at fencepost's election timeout", err)
	}
	var sides []failoverSide
	if h.fp != nil && h.lb.fpSess != nil {
		sides = append(sides, failoverSide{h.fp, fpProbe(h.fp, h.lb.fpSess.ids[0])})
	} else {
		sides = append(sides, failoverSide{k: missingCluster{}, newProbe: func() (probe, func(), error) {
			return nil, nil, fmt.Errorf("fencepost not running")
		}})
	}
	for _, c := range []*etcdCluster{h.etcd, tuned} {
		if c != nil {
			sides = append(sides, failoverSide{c, etcdProbe(c)})
		}
	}
	note := fmt.Sprintf("Failover: fencepost runs its defaults (raft heartbeat_timeout %s, election_timeout %s). "+
		"etcd runs at its defaults (heartbeat 100 ms, election 1000 ms) and at fencepost's election timeout "+
		"(heartbeat %s, election %s).", fpHB, fpEl, tunedHB, fpEl)
	failover(h.res, h.plan.FailoverReps, sides, note)
	if tuned != nil {
		tuned.stop()
	}
	if err := h.leaders(); err != nil {
		h.skip("leaders after failover", err)
	}
}

// missingCluster stands in for fencepost when it is not available, so the
// peers' failover still runs and the row shows an empty side.
type missingCluster struct{}

func (missingCluster) name() string { return sysFP }
func (missingCluster) waitLeader(time.Duration) (int, error) {
	return 0, fmt.Errorf("fencepost not running")
}
func (missingCluster) kill(int)            {}
func (missingCluster) restart(int) error   { return nil }
func (missingCluster) endpoints() []string { return nil }

// fpRaftTimeouts reads fencepost's default raft heartbeat and election
// timeouts from "fencepost config example server"; it falls back to the
// defaults in config/server.go when the command is not there.
func fpRaftTimeouts(bin string) (hb, el time.Duration) {
	hb, el = 100*time.Millisecond, 300*time.Millisecond
	if bin == "" {
		return
	}
	out, err := exec.Command(bin, "config", "example", "server").CombinedOutput()
	if err != nil {
		return
	}
	if m := regexp.MustCompile(`(?m)^\s*heartbeat_timeout:\s*"?([0-9a-z.]+)`).FindSubmatch(out); m != nil {
		if d, err := time.ParseDuration(string(m[1])); err == nil {
			hb = d
		}
	}
	if m := regexp.MustCompile(`(?m)^\s*election_timeout:\s*"?([0-9a-z.]+)`).FindSubmatch(out); m != nil {
		if d, err := time.ParseDuration(string(m[1])); err == nil {
			el = d
		}
	}
	return
}

// proxies runs workload 5: direct, the fencepost sidecar, nginx and squid
// in front of one upstream; in the TLS pass the upstream speaks HTTPS and
// squid sits out (proxytls.go says what TLS means here).
func (h *harness) proxies() {
	up, upAddr, upTLS, err := startProxyUpstream(h.dir, &h.ps)
	if err != nil {
		h.skip(wlProxy, err)
		return
	}
	defer up.stop(syscall.SIGTERM, 5*time.Second)
	targets := []httpTarget{{name: pathDirect, addr: upAddr, tls: upTLS.directTLS()}}
	if h.fp != nil && hasSubcommand(h.fpBin, "sidecar") {
		p, addr, err := startSidecar(h.fpBin, h.dir, upAddr, h.fp.endpoints(), upTLS, nil, &h.ps)
		if err != nil {
			h.skip("fencepost sidecar", err)
		} else {
			targets = append(targets, httpTarget{name: pathSidecar, addr: addr, absolute: true, proc: p})
		}
		if upTLS == nil {
			if t, sink, err := h.tracedSidecar(upAddr); err != nil {
				h.skip(pathTraced, err)
			} else {
				defer sink.close()
				targets = append(targets, t)
			}
		}
	} else {
		h.skip("fencepost sidecar", fmt.Errorf("no cluster or no sidecar subcommand"))
	}
	if p, addr, err := startNginx(h.dir, upAddr, upTLS, &h.ps); err != nil {
		h.skip(pathNginx, err)
	} else {
		targets = append(targets, httpTarget{name: pathNginx, addr: addr, proc: p, tree: true})
	}
	if upTLS == nil {
		if p, addr, err := startBareProxy(h.dir, upAddr, &h.ps); err != nil {
			h.skip(pathBare, err)
		} else {
			targets = append(targets, httpTarget{name: pathBare, addr: addr, absolute: true, proc: p})
		}
	}
	if upTLS != nil {
		h.res.Notes = append(h.res.Notes, "Workload 5 with TLS: the upstream serves HTTPS and the sidecar (tls.originate) and nginx "+
			"(proxy_pass https://, verified, session reuse) originate TLS to it; the worker's leg stays plain HTTP on loopback; "+
			"direct is HTTPS to the upstream; squid is not run (it cannot originate TLS for an http:// request without a rewrite), "+
			"nor is the bare fasthttp forwarder (a plaintext floor).")
	} else if p, addr, err := startSquid(h.dir, &h.ps); err != nil {
		h.skip(pathSquid, err)
	} else {
		targets = append(targets, httpTarget{name: pathSquid, addr: addr, absolute: true, proc: p, tree: true})
	}
	time.Sleep(time.Second)
	idle := map[string]float64{}
	for _, t := range targets {
		idle[t.name] = float64(t.rss()) / 1024
	}
	proxyBench(h.res, h.plan, targets, upAddr)
	recordProxyRSS(h.res, targets, idle)
	for _, t := range targets {
		stopProxy(t)
	}
}

// memory runs workload 6 on both clusters.
func (h *harness) memory() {
	cs := fmt.Sprintf("%d leases", h.plan.MemLeases)
	if h.fp != nil && h.lb.fpAddr != "" {
		memoryLoad(h.res, h.fp, h.plan.MemLeases, h.plan.MemLimit, fpFill(h.lb.fpAddr))
	}
	memoryLoad(h.res, h.etcd, h.plan.MemLeases, h.plan.MemLimit, etcdFill(h.lb.etcd))
	h.res.row(wlMemory, cs, "leader bytes/lease", false, sysFP, sysEtcd, extra("leader bytes/lease"))
	h.res.row(wlMemory, cs, "follower bytes/lease", false, sysFP, sysEtcd, extra("follower bytes/lease"))
	h.res.row(wlMemory, cs, "leader live heap bytes/lease", false, sysFP, sysEtcd, extra("leader live heap bytes/lease"))
	h.res.row(wlMemory, cs, "follower live heap bytes/lease", false, sysFP, sysEtcd, extra("follower live heap bytes/lease"))
	h.res.row(wlMemory, cs, "leader RSS MiB", false, sysFP, sysEtcd, extra("leader MiB"))
	h.res.row(wlMemory, cs, "fill leases/s", true, sysFP, sysEtcd, rate)
}
