package main

import (
	"fmt"
	"math"
	"strings"
)

// num formats v with three significant digits, thousands unseparated.
func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "—"
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// cell renders "median (min–max)" of xs.
func cell(xs []float64) string {
	if len(xs) == 0 {
		return "—"
	}
	lo, hi := minMax(xs)
	if len(xs) == 1 {
		return num(xs[0])
	}
	return fmt.Sprintf("%s (%s–%s)", num(median(xs)), num(lo), num(hi))
}

// ratioCell renders the ratio and says which side it favours.
func ratioCell(r Row) string {
	x := r.Ratio()
	if math.IsNaN(x) || len(r.A) == 0 {
		return "—"
	}
	better := x >= 1
	if !r.Higher {
		better = x <= 1
	}
	mark := ""
	if !better {
		mark = " (peer better)"
	}
	return fmt.Sprintf("%.2f×%s", x, mark)
}

// tableHead writes a markdown table's header row and its separator.
func tableHead(b *strings.Builder, cols ...string) {
	b.WriteString("| " + strings.Join(cols, " | ") + " |\n")
	b.WriteString(strings.Repeat("|---", len(cols)) + "|\n")
}

// arrow marks which way a metric is better.
func arrow(higherIsBetter bool) string {
	if higherIsBetter {
		return "↑"
	}
	return "↓"
}

// markdownTable renders every row, one table per workload: medians with
// min–max over the reps, and the ratio ours/peer.
func markdownTable(res *Results) string {
	var b strings.Builder
	last := ""
	for _, r := range res.Rows {
		if r.Workload != last {
			last = r.Workload
			fmt.Fprintf(&b, "\n### %s\n\n", r.Workload)
			tableHead(&b, "case", "metric", "ours", "ours: median (min–max)", "peer", "peer: median (min–max)", "ratio ours/peer")
		}
		fmt.Fprintf(&b, "| %s | %s %s | %s | %s | %s | %s | %s |\n",
			r.Case, r.Metric, arrow(r.Higher), r.Ours, cell(r.A), r.Peer, cell(r.B), ratioCell(r))
	}
	return b.String()
}

// goalTable renders the goal check.
func goalTable(res *Results) string {
	var b strings.Builder
	b.WriteString("| target (issue 6 unless named) | measured | status | what bounds it (same runs) |\n|---|---|---|---|\n")
	for _, g := range res.Goals {
		bound := g.Bound
		if bound == "" {
			bound = "—"
		}
		fmt.Fprintf(&b, "| %s | %s | **%s** | %s |\n", g.Target, g.Figure, g.Status, bound)
	}
	return b.String()
}

// ratioGoal checks median(ours)/median(peer) ≥ want for a row.
func ratioGoal(res *Results, target, wl, cs, metric, peer string, want float64) Goal {
	g := Goal{Target: target, Status: "not measured", Figure: "—"}
	r, ok := res.find(wl, cs, metric, peer)
	if !ok || len(r.A) == 0 || len(r.B) == 0 {
		return g
	}
	x := r.Ratio()
	g.Figure = fmt.Sprintf("%.2f× (%s vs %s %s)", x, num(median(r.A)), num(median(r.B)), metric)
	g.Status = status(x >= want)
	return g
}

// boundGoal checks a median of ours against an absolute bound (≤ limit).
func boundGoal(target string, xs []float64, limit float64, unit string) Goal {
	g := Goal{Target: target, Status: "not measured", Figure: "—"}
	if len(xs) == 0 {
		return g
	}
	m := median(xs)
	g.Figure = fmt.Sprintf("%s %s (median of %d)", num(m), unit, len(xs))
	g.Status = status(m <= limit)
	return g
}

// status names a check's outcome.
func status(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

// merge joins goals that must all hold (GET and POST, say) into one.
func merge(target string, gs ...Goal) Goal {
	out := Goal{Target: target, Status: "met"}
	var figs []string
	for _, g := range gs {
		figs = append(figs, g.Figure)
		switch {
		case g.Status == "not measured":
			out.Status = "not measured"
		case g.Status == "missed" && out.Status != "not measured":
			out.Status = "missed"
		}
	}
	out.Figure = strings.Join(figs, "; ")
	return out
}

// cpuBound describes, for one workload point, the cores and CPU per op of
// each named system and the load generator's cores (medians over reps).
func cpuBound(res *Results, wl, cs string, systems ...string) string {
	var parts []string
	gen := []float64{}
	for _, sys := range systems {
		var cores, per, p50 []float64
		for _, r := range res.Runs {
			if r.Workload == wl && r.Case == cs && r.System == sys && !r.Failed && r.Measure.ServerCores > 0 {
				cores = append(cores, r.Measure.ServerCores)
				per = append(per, r.Measure.ServerUsPerOp)
				p50 = append(p50, ms(r.Measure.P50))
				gen = append(gen, r.Measure.ClientCores)
			}
		}
		if len(cores) > 0 {
			parts = append(parts, fmt.Sprintf("%s: %s cores, %s µs CPU/op, p50 %s ms", sys, num(median(cores)), num(median(per)), num(median(p50))))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, "; ") + fmt.Sprintf("; load generator %s cores", num(median(gen)))
}

// peerLatency says what nginx added in the same reps: where it misses the
// same bound, the bound is the machine's wake-up latency, not the proxy.
func peerLatency(figs []string) string {
	if len(figs) == 0 {
		return ""
	}
	out := "nginx in the same reps: " + strings.Join(figs, "; ")
	if strings.Contains(out, "-") {
		out += " (negative: nginx's percentile was below direct's in that rep, i.e. within the noise)"
	}
	return out
}

// buildGoals checks every target of issue 6 against the rows.
func buildGoals(res *Results) {
	withBound := func(g Goal, bound string) Goal { g.Bound = bound; return g }
	res.Goals = append(res.Goals,
		withBound(ratioGoal(res, "acquire ≥ 2× etcd at C=64", wlAcquire, "C=64", "cycles/s", sysEtcd, 2),
			cpuBound(res, wlAcquire, "C=64", sysFP, sysEtcd)),
		withBound(ratioGoal(res, "acquire ≥ 1× etcd at C=1", wlAcquire, "C=1", "cycles/s", sysEtcd, 1),
			cpuBound(res, wlAcquire, "C=1", sysFP, sysEtcd)),
		withBound(ratioGoal(res, "heartbeats/s ≥ 3× etcd unary keepalive at C=64", wlHeartbeat, "C=64", "heartbeats/s", sysEtcdUnary, 3),
			cpuBound(res, wlHeartbeat, "C=64", sysFP, sysEtcdUnary)),
		withBound(ratioGoal(res, "lease renewals/s ≥ 100× etcd unary keepalive at C=64", wlHeartbeat, "C=64", "renewals/s", sysEtcdUnary, 100),
			fmt.Sprintf("one heartbeat renews the session's L = %d leases and one keepalive one lease, so this ratio is L × the heartbeats ratio: 100× needs heartbeats at %s× etcd's keepalives, or sessions holding more leases (the renewal itself is one write per heartbeat on the leader; only the request and reply grow with L)",
				res.Settings.LeasesPer, num(100/float64(max(res.Settings.LeasesPer, 1))))),
	)
	res.Goals = append(res.Goals, issue27Goals(res)...)
	fo := func(sys string) []float64 {
		var xs []float64
		for _, r := range res.Runs {
			if r.Workload == wlFailover && r.System == sys && r.Measure.Errors == 0 {
				xs = append(xs, r.Extra["ms"])
			}
		}
		return xs
	}
	res.Goals = append(res.Goals, boundGoal("failover median ≤ 600 ms (fencepost defaults)", fo(sysFP), 600, "ms"))
	eq := Goal{Target: "failover median ≤ etcd's at equal election timeout", Status: "not measured", Figure: "—"}
	for _, r := range res.Rows {
		if r.Workload == wlFailover && r.Peer != sysEtcd && len(r.A) > 0 && len(r.B) > 0 {
			eq.Figure = fmt.Sprintf("%s ms vs %s ms (%s)", num(median(r.A)), num(median(r.B)), r.Peer)
			eq.Status = status(median(r.A) <= median(r.B))
		}
	}
	res.Goals = append(res.Goals, eq)
	var nginx, squid, p50, p99 []Goal
	var p50Peer, p99Peer []string
	for _, pc := range proxyCases {
		maxCase := fmt.Sprintf("%s max rate, %d conns", pc.method, res.Settings.ProxyConns)
		fixCase := fmt.Sprintf("%s at %.0f req/s", pc.method, res.Settings.FixedRate)
		nginx = append(nginx, ratioGoal(res, "", wlProxy, maxCase, "req/s", pathNginx, 0.9))
		squid = append(squid, ratioGoal(res, "", wlProxy, maxCase, "req/s", pathSquid, 3))
		r, ok := res.find(wlProxy, fixCase, "added p50 µs", pathNginx)
		p50 = append(p50, boundGoal("", r.A, 100, "µs "+pc.method))
		if ok && len(r.B) > 0 {
			p50Peer = append(p50Peer, fmt.Sprintf("%s µs %s", num(median(r.B)), pc.method))
		}
		r, ok = res.find(wlProxy, fixCase, "added p99 µs", pathNginx)
		p99 = append(p99, boundGoal("", r.A, 1000, "µs "+pc.method))
		if ok && len(r.B) > 0 {
			p99Peer = append(p99Peer, fmt.Sprintf("%s µs %s", num(median(r.B)), pc.method))
		}
	}
	var proxyBound []string
	for _, pc := range proxyCases {
		maxCase := fmt.Sprintf("%s max rate, %d conns", pc.method, res.Settings.ProxyConns)
		if b := cpuBound(res, wlProxy, maxCase, pathSidecar, pathNginx, pathSquid); b != "" {
			proxyBound = append(proxyBound, pc.method+": "+b)
		}
	}
	res.Goals = append(res.Goals, httpsGoals(res)...)
	res.Goals = append(res.Goals,
		withBound(merge("proxy throughput ≥ 0.9× nginx (GET; POST)", nginx...), strings.Join(proxyBound, ". ")),
		merge("proxy throughput ≥ 3× squid (GET; POST)", squid...),
		withBound(merge(fmt.Sprintf("proxy added p50 ≤ 100 µs at %.0f req/s", res.Settings.FixedRate), p50...),
			peerLatency(p50Peer)),
		withBound(merge(fmt.Sprintf("proxy added p99 ≤ 1 ms at %.0f req/s", res.Settings.FixedRate), p99...),
			peerLatency(p99Peer)),
	)
	res.Goals = append(res.Goals, proxyGoals27(res)...)
	if g := tracedGoal(res); g.Status != "not measured" {
		res.Goals = append(res.Goals, g)
	}
	mem := fmt.Sprintf("%d leases", res.Settings.MemLeases)
	var perLease []float64
	var live []string
	for _, r := range res.Runs {
		if _, ok := r.Extra["leader bytes/lease"]; ok && r.Workload == wlMemory && r.Case == mem && r.System == sysFP {
			perLease = append(perLease, max(r.Extra["leader bytes/lease"], r.Extra["follower bytes/lease"]))
			if l, ok := r.Extra["leader live heap bytes/lease"]; ok {
				live = append(live, fmt.Sprintf("live Go heap after a forced collection: leader %s B/lease, followers %s B/lease; anonymous RSS leader %s, file-backed (raft log mmap) %s B/lease",
					num(l), num(r.Extra["follower live heap bytes/lease"]), num(r.Extra["leader anon bytes/lease"]), num(r.Extra["leader file bytes/lease"])))
			}
		}
	}
	res.Goals = append(res.Goals, withBound(boundGoal("≤ 1 KiB per lease in the cluster (worst node, RSS)", perLease, 1024, "B/lease"), strings.Join(live, "; ")))
}

// cpuTable renders, per workload point and system, the cores the server
// side and the load generator used (medians over the reps): the evidence
// for what bounds each throughput figure. 2 cores is the whole machine.
func cpuTable(res *Results) string {
	type key struct{ wl, cs, sys string }
	var order []key
	vals := map[key][3][]float64{}
	for _, r := range res.Runs {
		if r.Failed || r.Measure.ServerCores == 0 && r.Measure.ClientCores == 0 {
			continue
		}
		k := key{r.Workload, r.Case, r.System}
		v, seen := vals[k]
		if !seen {
			order = append(order, k)
		}
		v[0] = append(v[0], r.Measure.ServerCores)
		v[1] = append(v[1], r.Measure.ClientCores)
		v[2] = append(v[2], r.Measure.Rate)
		vals[k] = v
	}
	if len(order) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("| workload | case | system | ops/s | server cores | load generator cores |\n|---|---|---|---|---|---|\n")
	for _, k := range order {
		v := vals[k]
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", k.wl, k.cs, k.sys, num(median(v[2])), num(median(v[0])), num(median(v[1])))
	}
	return b.String()
}
