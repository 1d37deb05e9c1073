package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// postBody is the 1 KiB body of every POST in workload 5.
var postBody = []byte(strings.Repeat("fencepost-bench!", 64))

// proxyCases are the request kinds of workload 5.
var proxyCases = []struct {
	method string
	body   []byte
}{{"GET", nil}, {"POST", postBody}}

// proxyBench runs workload 5 over targets (the first must be direct):
// per request kind, rep by rep, each target at maximum rate with
// plan.ProxyConns connections, then each at plan.FixedRate. The order of
// the targets rotates every rep so no path always runs first or last.
// Added latency is paired within a rep: target p50/p99 minus direct's.
func proxyBench(res *Results, plan Plan, targets []httpTarget, upstream string) {
	for _, pc := range proxyCases {
		maxCase := fmt.Sprintf("%s max rate, %d conns", pc.method, plan.ProxyConns)
		fixCase := fmt.Sprintf("%s at %.0f req/s", pc.method, plan.FixedRate)
		for rep := 1; rep <= plan.ProxyReps; rep++ {
			order := rotate(targets, rep)
			for _, t := range order {
				m, peak := httpLoad(t, t.request(pc.method, upstream, pc.body), plan.ProxyConns, 0, plan.ProxyDur)
				res.add(Run{Workload: wlProxy, Case: maxCase, System: t.name, Rep: rep, Measure: m,
					Extra: map[string]float64{"rss MiB": peak}})
				logf("%s %s %s rep %d: %.0f req/s p50 %.0fµs p99 %.0fµs errs %d %s", wlProxy, maxCase, t.name, rep, m.Rate, us(m.P50), us(m.P99), m.Errors, m.FirstEr)
			}
			fixed := map[string]Measure{}
			for _, t := range order {
				m, peak := httpLoad(t, t.request(pc.method, upstream, pc.body), 64, plan.FixedRate, plan.ProxyDur)
				fixed[t.name] = m
				res.add(Run{Workload: wlProxy, Case: fixCase, System: t.name, Rep: rep, Measure: m,
					Extra: map[string]float64{"rss MiB": peak}})
				logf("%s %s %s rep %d: %.0f req/s p50 %.0fµs p99 %.0fµs errs %d %s", wlProxy, fixCase, t.name, rep, m.Rate, us(m.P50), us(m.P99), m.Errors, m.FirstEr)
			}
			// Pair each path with direct's run of the same rep.
			d, ok := fixed[pathDirect]
			for i := range res.Runs {
				r := &res.Runs[i]
				if !ok || r.Workload != wlProxy || r.Case != fixCase || r.Rep != rep || r.System == pathDirect || r.Measure.Ops == 0 {
					continue
				}
				r.Extra["added p50 µs"] = us(r.Measure.P50) - us(d.P50)
				r.Extra["added p99 µs"] = us(r.Measure.P99) - us(d.P99)
			}
		}
		for _, peer := range []string{pathNginx, pathSquid, pathBare, pathDirect} {
			res.row(wlProxy, maxCase, "req/s", true, pathSidecar, peer, rate)
		}
		for _, peer := range []string{pathNginx, pathSquid, pathBare} {
			res.row(wlProxy, maxCase, "proxy CPU µs/req", false, pathSidecar, peer, cpuPerOp)
		}
		res.row(wlProxy, maxCase, "req/s", true, pathTraced, pathSidecar, rate)
		res.row(wlProxy, maxCase, "proxy CPU µs/req", false, pathTraced, pathSidecar, cpuPerOp)
		for _, peer := range []string{pathNginx, pathSquid, pathBare} {
			res.row(wlProxy, fixCase, "added p50 µs", false, pathSidecar, peer, extra("added p50 µs"))
			res.row(wlProxy, fixCase, "added p99 µs", false, pathSidecar, peer, extra("added p99 µs"))
		}
		res.row(wlProxy, fixCase, "p50 µs", false, pathSidecar, pathDirect, func(r Run) float64 { return us(r.Measure.P50) })
		res.row(wlProxy, fixCase, "p99 µs", false, pathSidecar, pathDirect, func(r Run) float64 { return us(r.Measure.P99) })
	}
}

// proxyRSSRows adds the sidecar-against-nginx and -squid RSS rows, once.
func proxyRSSRows(res *Results) {
	if _, ok := res.find(wlMemory, "proxy RSS", "idle MiB", pathNginx); ok {
		return
	}
	for _, peer := range []string{pathNginx, pathSquid} {
		res.row(wlMemory, "proxy RSS", "idle MiB", false, pathSidecar, peer, extra("idle MiB"))
		res.row(wlMemory, "proxy RSS", "peak under load MiB", false, pathSidecar, peer, extra("peak MiB"))
	}
}

// recordProxyRSS stores each proxy's idle RSS and its peak over all of
// workload 5's runs as memory figures.
func recordProxyRSS(res *Results, targets []httpTarget, idle map[string]float64) {
	for _, t := range targets {
		if t.proc == nil {
			continue
		}
		peak := 0.0
		for _, r := range res.Runs {
			if r.Workload == wlProxy && r.System == t.name {
				peak = max(peak, r.Extra["rss MiB"])
			}
		}
		res.add(Run{Workload: wlMemory, Case: "proxy RSS", System: t.name, Rep: 1,
			Extra: map[string]float64{"idle MiB": idle[t.name], "peak MiB": peak}})
		logf("%s proxy RSS %s: idle %.1f MiB, peak under load %.1f MiB", wlMemory, t.name, idle[t.name], peak)
	}
	proxyRSSRows(res)
}

// rotate returns ts rotated left by k, keeping every element.
func rotate(ts []httpTarget, k int) []httpTarget {
	k %= len(ts)
	return append(append([]httpTarget{}, ts[k:]...), ts[:k]...)
}

// startSidecar runs "fencepost sidecar" in one-task mode: it opens a
// session, acquires task (profile bench) and heartbeats for it, so the
// proxy forwards writes. With up set it originates TLS to the upstream
// (tls.originate); in the TLS pass it reaches the cluster over TLS with a
// sidecar certificate. With sink set it traces every request to it
// (pathTraced) and lives in its own directory. It is ready once a POST
// through it succeeds.
func startSidecar(bin, dir, upstream string, cluster []string, up *upstreamTLS, sink *otlpSink, ps *ports) (*proc, string, error) {
	d := filepath.Join(dir, "sidecar")
	if sink != nil {
		d = filepath.Join(dir, "sidecar-traced")
	}
	if err := os.MkdirAll(d, 0o755); err != nil {
		return nil, "", err
	}
	proxyAddr := fmt.Sprintf("127.0.0.1:%d", ps.next())
	control := fmt.Sprintf("127.0.0.1:%d", ps.next())
	worker := "bench-worker"
	if sec != nil {
		worker = benchSidecar // the name its cluster certificate carries
	}
	conf := fmt.Sprintf("cluster: [%s]\nworker_id: %s\nproxy_addr: %s\ncontrol_addr: %s\ntask: sidecar-task-%d\nprofile: %s\nlog:\n  level: warn\n",
		strings.Join(cluster, ", "), worker, proxyAddr, control, time.Now().UnixNano(), benchProfile)
	conf += up.sidecarTLS(upstream) + sec.sidecarClusterTLS() + sink.tracingYAML()
	cf := filepath.Join(d, "sidecar.yaml")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		return nil, "", err
	}
	p, err := startProc("sidecar", filepath.Join(d, "sidecar.log"), bin, "sidecar", "--config", cf)
	if err != nil {
		return nil, "", err
	}
	t := httpTarget{name: pathSidecar, addr: proxyAddr, absolute: true}
	req := t.request("POST", upstream, postBody)
	rc := &rawConn{addr: proxyAddr}
	defer rc.close()
	err = waitFor(20*time.Second, "sidecar (a POST through it)", func() error {
		if p.exited() {
			return fmt.Errorf("exited: %s", p.tail(800))
		}
		return rc.roundTrip(req)
	})
	if err != nil {
		p.stop(syscall.SIGTERM, 5*time.Second)
		return nil, "", err
	}
	return p, proxyAddr, nil
}
