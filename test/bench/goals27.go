package main

import (
	"fmt"
	"strings"
)

// issue27Goals are the speed targets of issue 27 that are not the proxy's
// (those sit with the proxy's rows): heartbeats against etcd's keepalive
// stream, the checkpoint write at one and at 64 writers, and the live heap
// per lease. Each is checked against rows of the same run.
func issue27Goals(res *Results) []Goal {
	withBound := func(g Goal, bound string) Goal { g.Bound = bound; return g }
	hbBound := cpuBound(res, wlHeartbeat, "C=64", sysFP, sysEtcdStream)
	ckBound := func(cs string) string { return cpuBound(res, wlCheckpoint, cs, sysFP, sysEtcd) }
	return []Goal{
		withBound(ratioGoal(res, "heartbeats/s ≥ 1.5× etcd keepalive stream at C=64 (issue 27)", wlHeartbeat, "C=64", "heartbeats/s", sysEtcdStream, 1.5), hbBound),
		withBound(runGoal(res, "heartbeat p99 at C=64 no worse than the unary heartbeat's (issue 27)", wlHeartbeat, "C=64",
			sysFP, sysFPUnary, func(r Run) float64 { return ms(r.Measure.P99) }, "ms p99", 1), hbLatencyBound(res, 64)),
		// A sidecar sends one beat per interval, so in service a stream has
		// one beat in flight as a unary caller does; the row above loads
		// each stream with streamWindow to reach the cluster's rate.
		withBound(runGoal(res, "heartbeat p99 at C=64 with as many beats in flight as the unary path (one per stream, as a sidecar sends them) no worse than the unary heartbeat's (issue 27)", wlHeartbeat, "C=64",
			sysFPStream1, sysFPUnary, p99ms, "ms p99", 1), cpuBound(res, wlHeartbeat, "C=64", sysFPStream1, sysFPUnary)),
		withBound(runGoal(res, "server CPU per heartbeat ≤ 0.5× etcd stream's per keepalive at C=64 (issue 27)", wlHeartbeat, "C=64",
			sysFP, sysEtcdStream, func(r Run) float64 { return r.Measure.ServerUsPerOp }, "µs CPU/op", 0.5), hbBound),
		withBound(merge("checkpoint writes ≥ 1× etcd at C=1, p50 ≤ etcd's (issue 27)",
			ratioGoal(res, "", wlCheckpoint, "C=1", "writes/s", sysEtcd, 1),
			runGoal(res, "", wlCheckpoint, "C=1", sysFP, sysEtcd, func(r Run) float64 { return ms(r.Measure.P50) }, "ms p50", 1)), ckBound("C=1")),
		withBound(ratioGoal(res, "checkpoint writes ≥ 2× etcd at C=64 (issue 27)", wlCheckpoint, "C=64", "writes/s", sysEtcd, 2), ckBound("C=64")),
		liveHeapGoal(res),
	}
}

// runGoal checks median(f over ours' runs) ≤ want × median(f over the
// peer's runs) for one workload point: a cost or latency that must not
// exceed a share of the peer's.
func runGoal(res *Results, target, wl, cs, ours, peer string, f func(Run) float64, unit string, want float64) Goal {
	g := Goal{Target: target, Status: "not measured", Figure: "—"}
	a, b := res.values(wl, cs, ours, f), res.values(wl, cs, peer, f)
	if len(a) == 0 || len(b) == 0 || median(b) <= 0 {
		return g
	}
	x := median(a) / median(b)
	g.Figure = fmt.Sprintf("%.2f× (%s vs %s %s, %s vs %s)", x, num(median(a)), num(median(b)), unit, ours, peer)
	g.Status = status(x <= want)
	return g
}

// liveHeapGoal compares the live heap per lease of the worst fencepost
// member with etcd's worst member, both read after a forced collection in
// the same memory runs.
func liveHeapGoal(res *Results) Goal {
	g := Goal{Target: "live heap per lease ≤ etcd's, worst member (issue 27)", Status: "not measured", Figure: "—"}
	mem := fmt.Sprintf("%d leases", res.Settings.MemLeases)
	worst := func(r Run) float64 {
		return max(r.Extra["leader live heap bytes/lease"], r.Extra["follower live heap bytes/lease"])
	}
	var ours, peer []float64
	for _, r := range res.Runs {
		if r.Workload != wlMemory || r.Case != mem || r.Failed {
			continue
		}
		if _, ok := r.Extra["leader live heap bytes/lease"]; !ok {
			continue
		}
		switch r.System {
		case sysFP:
			ours = append(ours, worst(r))
		case sysEtcd:
			peer = append(peer, worst(r))
		}
	}
	if len(ours) == 0 || len(peer) == 0 {
		return g
	}
	a, b := median(ours), median(peer)
	g.Figure = fmt.Sprintf("%s vs %s B/lease", num(a), num(b))
	g.Status = status(a <= b)
	var parts []string
	for _, r := range res.Runs {
		if r.Workload == wlMemory && r.Case == mem && r.System == sysFP && !r.Failed {
			if v, ok := r.Extra["leader live heap bytes/lease"]; ok {
				parts = append(parts, fmt.Sprintf("fencepost leader %s, followers %s B/lease", num(v), num(r.Extra["follower live heap bytes/lease"])))
			}
		}
	}
	g.Bound = strings.Join(parts, "; ")
	return g
}

// proxyGoals27 are issue 27's proxy targets beyond throughput: CPU per
// request within 1.2× nginx's, and an added p50 at the fixed rate no
// higher than nginx's, GET and POST. The bound beside the CPU goal is the
// bare fasthttp forwarder of the same reps: the part of the sidecar's
// cost that is fasthttp's server and client, not fencing.
func proxyGoals27(res *Results) []Goal {
	cpu := func(r Run) float64 { return r.Measure.ServerUsPerOp }
	var cpuGoals, p50Goals []Goal
	var floor []string
	for _, pc := range proxyCases {
		maxCase := fmt.Sprintf("%s max rate, %d conns", pc.method, res.Settings.ProxyConns)
		fixCase := fmt.Sprintf("%s at %.0f req/s", pc.method, res.Settings.FixedRate)
		g := runGoal(res, "", wlProxy, maxCase, pathSidecar, pathNginx, cpu, "µs CPU/req "+pc.method, 1.2)
		cpuGoals = append(cpuGoals, g)
		if sc, bare := res.values(wlProxy, maxCase, pathSidecar, cpu), res.values(wlProxy, maxCase, pathBare, cpu); len(sc) > 0 && len(bare) > 0 && median(bare) > 0 {
			floor = append(floor, fmt.Sprintf("%s: the bare fasthttp forwarder takes %s µs CPU/req, the sidecar %.2f× that",
				pc.method, num(median(bare)), median(sc)/median(bare)))
		}
		added := func(r Run) float64 { return r.Extra["added p50 µs"] }
		a, b := res.values(wlProxy, fixCase, pathSidecar, added), res.values(wlProxy, fixCase, pathNginx, added)
		p := Goal{Status: "not measured", Figure: "—"}
		if len(a) > 0 && len(b) > 0 {
			p.Figure = fmt.Sprintf("%s µs vs nginx %s µs %s", num(median(a)), num(median(b)), pc.method)
			p.Status = status(median(a) <= median(b))
		}
		p50Goals = append(p50Goals, p)
	}
	cg := merge("proxy CPU per request ≤ 1.2× nginx's (GET; POST) (issue 27)", cpuGoals...)
	cg.Bound = strings.Join(floor, ". ")
	return []Goal{cg,
		merge(fmt.Sprintf("proxy added p50 at %.0f req/s ≤ nginx's (GET; POST) (issue 27)", res.Settings.FixedRate), p50Goals...)}
}

// hbLatencyBound is what bounds the streamed heartbeat's latency against
// the unary path's at C=c, from the same run: the stream keeps up to
// c·streamWindow beats in flight where the unary path keeps c, so by
// Little's law (mean time in the system = in flight / throughput) its
// mean latency is about that many in flight over its rate (the load keeps
// its windows full), whatever the server does with each beat. Equal
// latency would need the stream's throughput streamWindow times the unary
// path's.
func hbLatencyBound(res *Results, c int) string {
	cs := fmt.Sprintf("C=%d", c)
	st, un := res.values(wlHeartbeat, cs, sysFP, rate), res.values(wlHeartbeat, cs, sysFPUnary, rate)
	if len(st) == 0 || len(un) == 0 || median(st) <= 0 || median(un) <= 0 {
		return ""
	}
	inSt, inUn := float64(c*streamWindow), float64(c)
	return fmt.Sprintf("queueing (Little's law): the stream keeps up to %.0f beats in flight (%d streams × %d) against the unary path's %.0f, "+
		"so at %s and %s heartbeats/s the mean time a beat spends in the system is about %s ms against %s ms (in flight over throughput); "+
		"the same p99 would need %.0f× the unary throughput, the stream has %.2f×",
		inSt, c, streamWindow, inUn, num(median(st)), num(median(un)),
		num(1000*inSt/median(st)), num(1000*inUn/median(un)), inSt/inUn, median(st)/median(un)) + equalInflight(res, cs)
}

// equalInflight is the stream's latency against the unary path's with as
// many beats in flight (one per stream, as a sidecar sends them), from the
// same reps; "" when that run is missing.
func equalInflight(res *Results, cs string) string {
	s1, un := res.values(wlHeartbeat, cs, sysFPStream1, p99ms), res.values(wlHeartbeat, cs, sysFPUnary, p99ms)
	s1p50, unp50 := res.values(wlHeartbeat, cs, sysFPStream1, p50ms), res.values(wlHeartbeat, cs, sysFPUnary, p50ms)
	if len(s1) == 0 || len(un) == 0 || len(s1p50) == 0 || len(unp50) == 0 || median(un) <= 0 {
		return ""
	}
	return fmt.Sprintf(". With one beat in flight per stream, as many as the unary path has, the stream's p99 is %s ms against %s ms (%.2f×), p50 %s against %s ms",
		num(median(s1)), num(median(un)), median(s1)/median(un), num(median(s1p50)), num(median(unp50)))
}
