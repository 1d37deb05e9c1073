package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// wlHTTPS names workload 7: the intercepted-HTTPS path.
const wlHTTPS = "7 intercepted HTTPS"

// Workload 7's paths to one HTTPS upstream (and, for the latency
// comparison with the plain-HTTP path, one plain upstream).
const (
	pathDirectTLS   = "direct TLS"
	pathIntercept   = "fencepost intercept"
	pathTunnel      = "fencepost CONNECT tunnel"
	pathSquidBump   = "squid ssl-bump"
	pathMitmproxy   = "mitmproxy"
	pathDirectPlain = "direct plain HTTP"
	pathSidecarHTTP = "fencepost plain HTTP"
)

// httpsPeers are workload 7's peers and their Debian packages.
var httpsPeers = []struct{ bin, pkg string }{{"squid", "squid-openssl"}, {"mitmdump", "mitmproxy"}}

// tlsTarget is one way of reaching the HTTPS upstream: directly, or by
// CONNECT through a proxy and TLS to whatever answers inside.
type tlsTarget struct {
	name    string
	addr    string // where the load generator connects
	connect string // CONNECT authority; "" for a direct connection
	plain   bool   // plain HTTP (absolute-form through a proxy when connect is set)
	cfg     *tls.Config
	proc    *proc
	tree    bool
}

// tlsConn is one connection of the load generator.
type tlsConn struct {
	t    *tlsTarget
	c    net.Conn
	br   *bufio.Reader
	resp fasthttp.Response
}

// dial connects, tunnels and handshakes.
func (tc *tlsConn) dial() error {
	raw, err := net.DialTimeout("tcp", tc.t.addr, 2*time.Second)
	if err != nil {
		return err
	}
	_ = raw.SetDeadline(time.Now().Add(5 * time.Second))
	if tc.t.connect != "" && !tc.t.plain {
		if _, err := fmt.Fprintf(raw, "CONNECT %[1]s HTTP/1.1\r\nHost: %[1]s\r\n\r\n", tc.t.connect); err != nil {
			raw.Close()
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReaderSize(raw, 64), &http.Request{Method: "CONNECT"})
		if err != nil || resp.StatusCode != 200 {
			raw.Close()
			if err == nil {
				err = fmt.Errorf("CONNECT: %s", resp.Status)
			}
			return err
		}
	}
	c := raw
	if !tc.t.plain {
		t := tls.Client(raw, tc.t.cfg)
		if err := t.Handshake(); err != nil {
			raw.Close()
			return err
		}
		c = t
	}
	tc.c, tc.br = c, bufio.NewReaderSize(c, 16<<10)
	return nil
}

// roundTrip sends req on the connection (dialling first when there is
// none) and reads a 200; fresh closes the connection after it.
func (tc *tlsConn) roundTrip(req []byte, fresh bool) error {
	if tc.c == nil {
		if err := tc.dial(); err != nil {
			return err
		}
	}
	_ = tc.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := tc.c.Write(req); err != nil {
		tc.close()
		return err
	}
	tc.resp.Reset()
	err := tc.resp.Read(tc.br)
	if err != nil || fresh || tc.resp.ConnectionClose() {
		tc.close()
	}
	if err != nil {
		return err
	}
	if code := tc.resp.StatusCode(); code != 200 {
		return fmt.Errorf("HTTP %d: %.200s", code, tc.resp.Body())
	}
	return nil
}

func (tc *tlsConn) close() {
	if tc.c != nil {
		tc.c.Close()
		tc.c = nil
	}
}

// request is the raw request for t: origin-form inside TLS, absolute-form
// to a plain proxy.
func (t *tlsTarget) request(method, upstream string, body []byte) []byte {
	ht := httpTarget{addr: upstream, absolute: t.plain && t.connect != ""}
	if !ht.absolute {
		ht.addr = upstream
	}
	return ht.request(method, upstream, body)
}

func (t *tlsTarget) pids() []int {
	return httpTarget{proc: t.proc}.pids()
}

// load runs c connections against t, closed loop (rate 0) or open loop;
// fresh makes every request a new TCP connection and TLS handshake.
func (t *tlsTarget) load(req []byte, c int, rate float64, d time.Duration, fresh bool) Measure {
	conns := make([]*tlsConn, c)
	for i := range conns {
		conns[i] = &tlsConn{t: t}
	}
	defer func() {
		for _, tc := range conns {
			tc.close()
		}
	}()
	op := func(_ context.Context, w int) error { return conns[w].roundTrip(req, fresh) }
	return metered(t.pids(), func() Measure {
		if rate > 0 {
			return openLoop(c, rate, d, op)
		}
		return closedLoop(c, d, 50_000_000, op)
	})
}

// httpsFixedRate is workload 7's fixed rate: below mitmproxy's capacity
// on two cores, so every path's latency is measured unsaturated.
const httpsFixedRate = 400

// httpsBench runs workload 7: per rep, in rotating order, every TLS path
// at maximum rate over keep-alive (GET, POST), with a new connection per
// request (GET), and at httpsFixedRate; the plain paths only at the
// fixed rate, for the added-latency comparison.
func httpsBench(res *Results, plan Plan, targets, plain []tlsTarget, tlsUp, plainUp string) {
	ka := func(m string) string { return fmt.Sprintf("%s keep-alive max rate, %d conns", m, plan.ProxyConns) }
	fresh := fmt.Sprintf("GET new TLS connection per request, %d conns", plan.ProxyConns)
	fixed := fmt.Sprintf("GET at %d req/s", httpsFixedRate)
	record := func(t *tlsTarget, cs string, rep int, m Measure) Measure {
		res.add(Run{Workload: wlHTTPS, Case: cs, System: t.name, Rep: rep, Measure: m, Extra: map[string]float64{}})
		logf("%s %s %s rep %d: %.0f req/s p50 %.0fµs p99 %.0fµs cpu %.0fµs/req errs %d %s", wlHTTPS, cs, t.name, rep, m.Rate, us(m.P50), us(m.P99), m.ServerUsPerOp, m.Errors, m.FirstEr)
		return m
	}
	for rep := 1; rep <= plan.ProxyReps; rep++ {
		order := append([]tlsTarget{}, targets[rep%len(targets):]...)
		order = append(order, targets[:rep%len(targets)]...)
		for i := range order {
			t := &order[i]
			for _, pc := range proxyCases {
				record(t, ka(pc.method), rep, t.load(t.request(pc.method, tlsUp, pc.body), plan.ProxyConns, 0, plan.ProxyDur, false))
			}
			record(t, fresh, rep, t.load(t.request("GET", tlsUp, nil), plan.ProxyConns, 0, plan.ProxyDur, true))
		}
		p50 := map[string]Measure{}
		for _, ts := range [][]tlsTarget{order, plain} {
			for i := range ts {
				t := &ts[i]
				up := tlsUp
				if t.plain {
					up = plainUp
				}
				p50[t.name] = record(t, fixed, rep, t.load(t.request("GET", up, nil), 16, httpsFixedRate, plan.ProxyDur, false))
			}
		}
		for i := range res.Runs {
			r := &res.Runs[i]
			if r.Workload != wlHTTPS || r.Case != fixed || r.Rep != rep || r.Measure.Ops == 0 {
				continue
			}
			base, ok := p50[pathDirectTLS]
			if r.System == pathSidecarHTTP {
				base, ok = p50[pathDirectPlain]
			}
			if ok && r.System != pathDirectTLS && r.System != pathDirectPlain {
				r.Extra["added p50 µs"] = us(r.Measure.P50) - us(base.P50)
				r.Extra["added p99 µs"] = us(r.Measure.P99) - us(base.P99)
			}
		}
	}
	for _, pc := range proxyCases {
		for _, peer := range []string{pathSquidBump, pathMitmproxy, pathTunnel, pathDirectTLS} {
			res.row(wlHTTPS, ka(pc.method), "req/s", true, pathIntercept, peer, rate)
		}
		for _, peer := range []string{pathSquidBump, pathMitmproxy} {
			res.row(wlHTTPS, ka(pc.method), "proxy CPU µs/req", false, pathIntercept, peer, cpuPerOp)
		}
	}
	for _, peer := range []string{pathSquidBump, pathMitmproxy, pathTunnel, pathDirectTLS} {
		res.row(wlHTTPS, fresh, "new TLS connections/s", true, pathIntercept, peer, rate)
	}
	for _, peer := range []string{pathSquidBump, pathMitmproxy, pathSidecarHTTP} {
		res.row(wlHTTPS, fixed, "added p50 µs", false, pathIntercept, peer, extra("added p50 µs"))
		res.row(wlHTTPS, fixed, "added p99 µs", false, pathIntercept, peer, extra("added p99 µs"))
	}
}

// httpsGoals are the targets for workload 7, measured in the same
// run.
func httpsGoals(res *Results) []Goal {
	ka := func(m string) string {
		return fmt.Sprintf("%s keep-alive max rate, %d conns", m, res.Settings.ProxyConns)
	}
	fresh := fmt.Sprintf("GET new TLS connection per request, %d conns", res.Settings.ProxyConns)
	fixed := fmt.Sprintf("GET at %d req/s", httpsFixedRate)
	var squid, mitm, cpu []Goal
	var bound []string
	for _, pc := range proxyCases {
		squid = append(squid, ratioGoal(res, "", wlHTTPS, ka(pc.method), "req/s", pathSquidBump, 1.5))
		mitm = append(mitm, ratioGoal(res, "", wlHTTPS, ka(pc.method), "req/s", pathMitmproxy, 5))
		g := ratioGoal(res, "", wlHTTPS, ka(pc.method), "proxy CPU µs/req", pathSquidBump, 0)
		if r, ok := res.find(wlHTTPS, ka(pc.method), "proxy CPU µs/req", pathSquidBump); ok && len(r.A) > 0 && len(r.B) > 0 {
			g.Status = status(median(r.A) <= 0.5*median(r.B))
		}
		cpu = append(cpu, g)
		if b := cpuBound(res, wlHTTPS, ka(pc.method), pathIntercept, pathSquidBump, pathMitmproxy, pathDirectTLS); b != "" {
			bound = append(bound, pc.method+": "+b)
		}
	}
	lat := Goal{Target: "intercepted added p50 within 1.5× the plain-HTTP path's", Status: "not measured", Figure: "—"}
	if r, ok := res.find(wlHTTPS, fixed, "added p50 µs", pathSidecarHTTP); ok && len(r.A) > 0 && len(r.B) > 0 {
		lat.Figure = fmt.Sprintf("%s µs vs %s µs", num(median(r.A)), num(median(r.B)))
		lat.Status = status(median(r.A) <= 1.5*max(median(r.B), 1))
	}
	newConn := ratioGoal(res, "new TLS connections/s ≥ 2× squid ssl-bump", wlHTTPS, fresh, "new TLS connections/s", pathSquidBump, 2)
	newConn.Bound = cpuBound(res, wlHTTPS, fresh, pathIntercept, pathSquidBump, pathDirectTLS)
	return []Goal{
		withGoalBound(merge("intercepted keep-alive ≥ 1.5× squid ssl-bump (GET; POST)", squid...), strings.Join(bound, ". ")),
		merge("intercepted keep-alive ≥ 5× mitmproxy (GET; POST)", mitm...),
		newConn,
		merge("intercepted proxy CPU/req ≤ 0.5× squid ssl-bump's (GET; POST)", cpu...),
		lat,
	}
}

func withGoalBound(g Goal, b string) Goal { g.Bound = b; return g }

// https runs workload 7.
func (h *harness) https() {
	if err := installPackages(httpsPeers); err != nil {
		h.skip(wlHTTPS, err)
		return
	}
	if h.fp == nil || !hasSubcommand(h.fpBin, "sidecar") {
		h.skip(wlHTTPS, errors.New("no fencepost cluster or sidecar"))
		return
	}
	// squid's certificate helper runs as the "proxy" user and must reach
	// its database: let it traverse the harness's private directory.
	if err := os.Chmod(h.dir, 0o711); err != nil {
		h.skip(wlHTTPS, err)
		return
	}
	dir := filepath.Join(h.dir, "https")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		h.skip(wlHTTPS, err)
		return
	}
	pki, err := newBenchPKI(dir)
	if err != nil {
		h.skip(wlHTTPS, err)
		return
	}
	self, _ := os.Executable()
	tlsUp := fmt.Sprintf("127.0.0.1:%d", h.ps.next())
	up, err := startProc("upstream-tls", filepath.Join(dir, "upstream.log"), self, "upstream-tls", tlsUp, pki.leafCert, pki.leafKey)
	if err == nil {
		err = waitFor(10*time.Second, "upstream-tls", func() error { return tcpUp(tlsUp) })
	}
	if err != nil {
		h.skip(wlHTTPS, err)
		return
	}
	defer up.stop(syscall.SIGTERM, 5*time.Second)
	plainProc, plainUp, err := startUpstream(dir, &h.ps)
	if err != nil {
		h.skip(wlHTTPS, err)
		return
	}
	defer plainProc.stop(syscall.SIGTERM, 5*time.Second)

	upRoots, _ := poolFrom(pki.caCert)
	verify := func(roots *x509.CertPool) *tls.Config {
		return &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12}
	}
	targets := []tlsTarget{{name: pathDirectTLS, addr: tlsUp, cfg: verify(upRoots)}}
	var procs []*proc
	defer func() {
		for _, p := range procs {
			p.stop(syscall.SIGTERM, 10*time.Second)
		}
	}()
	_, upPort, _ := net.SplitHostPort(tlsUp)
	sc, scAddr, bundle, err := startInterceptSidecar(h.fpBin, dir, h.fp.endpoints(), pki.caCert, "localhost:"+upPort, plainUp, &h.ps)
	if err != nil {
		h.skip(pathIntercept, err)
	} else {
		procs = append(procs, sc)
		roots, _ := poolFrom(bundle)
		targets = append(targets,
			tlsTarget{name: pathIntercept, addr: scAddr, connect: tlsUp, cfg: verify(roots), proc: sc},
			// A blind tunnel: the same sidecar, a host it does not intercept.
			tlsTarget{name: pathTunnel, addr: scAddr, connect: "localhost:" + upPort, cfg: verify(upRoots), proc: sc})
	}
	if p, addr, err := startSquidBump(dir, pki, &h.ps); err != nil {
		h.skip(pathSquidBump, err)
	} else {
		procs = append(procs, p)
		roots, _ := poolFrom(pki.bumpCert)
		targets = append(targets, tlsTarget{name: pathSquidBump, addr: addr, connect: tlsUp, cfg: verify(roots), proc: p, tree: true})
	}
	if p, addr, caFile, err := startMitmproxy(dir, pki, &h.ps); err != nil {
		h.skip(pathMitmproxy, err)
	} else {
		procs = append(procs, p)
		roots, _ := poolFrom(caFile)
		targets = append(targets, tlsTarget{name: pathMitmproxy, addr: addr, connect: tlsUp, cfg: verify(roots), proc: p})
	}
	plain := []tlsTarget{{name: pathDirectPlain, addr: plainUp, plain: true}}
	if sc != nil {
		plain = append(plain, tlsTarget{name: pathSidecarHTTP, addr: scAddr, connect: plainUp, plain: true, proc: sc})
	}
	httpsBench(h.res, h.plan, targets, plain, tlsUp, plainUp)
}

// startInterceptSidecar runs "fencepost sidecar" in one-task mode,
// intercepting 127.0.0.1 (verifying the upstream against caFile) and
// allowing a blind tunnel to tunnel. It is ready once a POST to the plain
// upstream goes through.
func startInterceptSidecar(bin, dir string, cluster []string, caFile, tunnel, plainUp string, ps *ports) (*proc, string, string, error) {
	d := filepath.Join(dir, "sidecar")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return nil, "", "", err
	}
	proxyAddr := fmt.Sprintf("127.0.0.1:%d", ps.next())
	control := fmt.Sprintf("127.0.0.1:%d", ps.next())
	bundle := filepath.Join(d, "ca-bundle.pem")
	conf := fmt.Sprintf(`cluster: [%s]
worker_id: bench-https
proxy_addr: %s
control_addr: %s
task: https-task-%d
profile: %s
intercept:
  hosts: ["127.0.0.1"]
  bundle_file: %s
  upstream_ca_file: %s
connect:
  allow: [%q]
log:
  level: warn
`, strings.Join(cluster, ", "), proxyAddr, control, time.Now().UnixNano(), benchProfile, bundle, caFile, tunnel)
	cf := filepath.Join(d, "sidecar.yaml")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		return nil, "", "", err
	}
	p, err := startProc("sidecar-https", filepath.Join(d, "sidecar.log"), bin, "sidecar", "--config", cf)
	if err != nil {
		return nil, "", "", err
	}
	t := httpTarget{addr: proxyAddr, absolute: true}
	rc := &rawConn{addr: proxyAddr}
	defer rc.close()
	err = waitFor(20*time.Second, "sidecar (a POST through it)", func() error {
		if p.exited() {
			return fmt.Errorf("exited: %s", p.tail(800))
		}
		return rc.roundTrip(t.request("POST", plainUp, postBody))
	})
	if err != nil {
		p.stop(syscall.SIGTERM, 5*time.Second)
		return nil, "", "", err
	}
	return p, proxyAddr, bundle, nil
}
