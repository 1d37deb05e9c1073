package proxy

import (
	"bufio"
	"bytes"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/fence"
)

// FuzzProxyRequest feeds arbitrary bytes through the proxy's request path
// (parse, decide, build) under four lease states and checks the safety
// property: nothing is forwarded as a write without a current lease, and
// every forwarded request carries exactly one X-Fencing-Token, equal to
// the current epoch when stamped, and no worker-sent X-Fencing-* or
// hop-by-hop header.
func FuzzProxyRequest(f *testing.F) {
	seeds := []string{
		"POST http://up.example/x HTTP/1.1\r\nHost: up.example\r\nContent-Length: 1\r\n\r\nx",
		"GET http://up.example/r HTTP/1.1\r\nHost: up.example\r\n\r\n",
		"PUT http://up.example/x HTTP/1.1\r\nX-Fencing-Token: 99999\r\nx-fencing-token: 1\r\nX-FENCING-TASK: other\r\nContent-Length: 0\r\n\r\n",
		"DELETE http://up.example/x HTTP/1.1\r\nConnection: X-Secret, close\r\nX-Secret: 1\r\nKeep-Alive: 1\r\nTE: trailers\r\n\r\n",
		"POST http://up.example/x HTTP/1.1\r\nProxy-Authorization: Basic dGFzazo=\r\nX-Fencing-Action-Id: a1\r\nContent-Length: 0\r\n\r\n",
		"POST http://up.example/x HTTP/1.1\r\nX-Fencing-Task-Select: nope\r\nContent-Length: 0\r\n\r\n",
		"OPTIONS http://up.example/x HTTP/1.1\r\nIdempotency-Key: k\r\n\r\n",
		"post http://up.example/x HTTP/1.1\r\n\r\n",
		"POST /origin HTTP/1.1\r\nHost: up.example\r\n\r\n",
		"PATCH http://UP.example:8080/a/../b?q=1#frag HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n",
		"GET http://up.example/ HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
	}
	s, cfg, clk := newFuzzSidecar(f, seeds, 4, []WriteRule{{Host: "up.example", PathPrefix: "/r", Methods: []string{"POST"}, Write: false}})
	epoch := uint64(0)
	f.Fuzz(func(t *testing.T, raw []byte, mode byte) {
		epoch++
		setFuzzLease(s, cfg, clk, epoch, mode)
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.DisableNormalizing()
		if err := ctx.Request.Read(bufio.NewReader(bytes.NewReader(raw))); err != nil {
			return // the server answers 400 before the handler runs
		}
		if ctx.IsConnect() {
			return
		}
		x := newExchange(s, &ctx)
		defer x.finish()
		if e := x.decide(); e != nil {
			return
		}
		x.req = fasthttp.AcquireRequest()
		if e := x.stamp(); e != nil {
			return
		}
		checkForwarded(t, s, clk, mode, x)
	})
}

// checkForwarded checks the safety properties of a request the proxy
// would forward: a write only with a current lease; a stamped request
// carries exactly one token (the current epoch), task and holder, and no
// worker-sent X-Fencing-* or hop-by-hop header.
func checkForwarded(t *testing.T, s *Sidecar, clk *fakeClock, mode byte, d *exchange) {
	req := d.req
	// Forwarded. Property 1: a write only with a current lease.
	l, why := s.keeper.table.current("task", clk.Now())
	if d.write && (why != "" || !d.leased || d.lease.Epoch != l.Epoch) {
		t.Fatalf("write forwarded without a current lease (mode %d, why %q)", mode, why)
	}
	var tokens, fencing [][]byte
	for k, v := range req.Header.All() {
		if hasPrefixFold(k, fencingPrefix) {
			fencing = append(fencing, bytes.Clone(k))
		}
		if bytes.EqualFold(k, []byte(fence.HeaderToken)) {
			tokens = append(tokens, bytes.Clone(v))
		}
		if isHopByHop(k) {
			t.Fatalf("hop-by-hop header %q forwarded", k)
		}
	}
	if !d.leased {
		if len(fencing) != 0 {
			t.Fatalf("unstamped forward carries %q", fencing)
		}
		return
	}
	// Property 2: exactly one token, equal to the current epoch.
	if len(tokens) != 1 || string(tokens[0]) != fence.FormatEpoch(l.Epoch) {
		t.Fatalf("tokens %q, want exactly [%d]", tokens, l.Epoch)
	}
	for _, k := range fencing {
		switch {
		case bytes.EqualFold(k, []byte(fence.HeaderToken)), bytes.EqualFold(k, []byte(fence.HeaderTask)),
			bytes.EqualFold(k, []byte(fence.HeaderHolder)), bytes.EqualFold(k, []byte(fence.HeaderSignature)):
		default:
			t.Fatalf("worker-sent fencing header %q forwarded", k)
		}
	}
	if len(fencing) != 3 {
		t.Fatalf("want one token, task and holder, got %q", fencing)
	}
}

// FuzzTunnelRequest feeds arbitrary bytes through the path of a request
// inside a fenced CONNECT tunnel (plain or intercepted TLS): the tunnel
// entry (Host and target checked against the CONNECT authority), then
// the same decide and build as a proxied request. Besides the properties
// of FuzzProxyRequest, whatever the request says, it goes to the CONNECT
// authority and nowhere else, over TLS exactly when the tunnel was TLS.
func FuzzTunnelRequest(f *testing.F) {
	seeds := []string{
		"POST /x HTTP/1.1\r\nHost: up.example\r\nContent-Length: 1\r\n\r\nx",
		"POST /x HTTP/1.1\r\nHost: up.example:443\r\nX-Fencing-Token: 9\r\n\r\n",
		"GET /r?q HTTP/1.1\r\nHost: other.example\r\n\r\n",
		"POST http://up.example/x HTTP/1.1\r\nHost: up.example\r\n\r\n",
		"POST https://evil.example/x HTTP/1.1\r\nHost: up.example\r\n\r\n",
		"PUT x HTTP/1.1\r\nHost: up.example\r\n\r\n",
		"CONNECT up.example:443 HTTP/1.1\r\nHost: up.example\r\n\r\n",
		"DELETE /a/../b HTTP/1.1\r\nHost: UP.EXAMPLE\r\nConnection: close, X-A\r\nX-A: 1\r\n\r\n",
		"POST /x HTTP/1.1\r\nHost: up.example:8443\r\nProxy-Authorization: Basic dGFzazo=\r\n\r\n",
	}
	s, cfg, clk := newFuzzSidecar(f, seeds, 8, nil)
	epoch := uint64(0)
	f.Fuzz(func(t *testing.T, raw []byte, mode byte) {
		epoch++
		setFuzzLease(s, cfg, clk, epoch, mode)
		info := &tunnelInfo{host: "up.example", port: "443", tls: mode&4 != 0}
		var ctx fasthttp.RequestCtx
		ctx.Init2(&tunnelConn{info: info}, nil, false)
		ctx.Request.Header.DisableNormalizing()
		if err := ctx.Request.Read(bufio.NewReader(bytes.NewReader(raw))); err != nil {
			return
		}
		if e := s.pipe.enterTunnel(&ctx); e != nil {
			return
		}
		d := &exchange{p: s.pipe, ctx: &ctx, in: info.entry()}
		defer d.finish()
		if e := d.decide(); e != nil {
			return
		}
		if d.tgt.host != info.host || d.tgt.hostPort != "up.example:443" {
			t.Fatalf("a tunnel to up.example:443 forwards to %q", d.tgt.hostPort)
		}
		if (d.tgt.tls != nil) != info.tls {
			t.Fatalf("tunnel TLS %v, upstream TLS %v", info.tls, d.tgt.tls != nil)
		}
		d.req = fasthttp.AcquireRequest()
		if e := d.stamp(); e != nil {
			return
		}
		if h := string(d.req.URI().Host()); h != "up.example:443" && h != "up.example" {
			t.Fatalf("upstream request goes to %q", h)
		}
		checkForwarded(t, s, clk, mode, d)
	})
}

// setFuzzLease puts the lease of "task" into one of four states by mode:
// current, past its deadline, revoked, or never granted.
func setFuzzLease(s *Sidecar, cfg Config, clk *fakeClock, epoch uint64, mode byte) {
	s.keeper.table = newLeaseTable(cfg.Drift, cfg.MarginFloor)
	now := clk.Now()
	if mode%4 != 3 {
		s.keeper.table.grant(testGrant("task", epoch, 10*time.Second, 3*time.Second), now, now)
	}
	switch mode % 4 {
	case 1:
		clk.Advance(10 * time.Second)
	case 2:
		s.keeper.table.drop("task", 0, ReasonRevoked)
	}
}

// newFuzzSidecar seeds f with every seed in every mode below modes and
// builds an unstarted sidecar on a fake clock with rules.
func newFuzzSidecar(f *testing.F, seeds []string, modes byte, rules []WriteRule) (*Sidecar, Config, *fakeClock) {
	for _, s := range seeds {
		for mode := byte(0); mode < modes; mode++ {
			f.Add([]byte(s), mode)
		}
	}
	clk := newFakeClock()
	cfg := baseConfig(f)
	cfg.Clock = clk
	cfg.WriteRules = rules
	s, err := New(cfg, newFakeCluster())
	if err != nil {
		f.Fatal(err)
	}
	return s, cfg, clk
}
