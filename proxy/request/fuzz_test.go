package request

import (
	"bufio"
	"bytes"
	"cmp"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/proxy/leases"
	"github.com/fencepost/fencepost/proxy/proxytest"
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
	p, fl := newFuzzPath(f, seeds, 4, []WriteRule{{Host: "up.example", PathPrefix: "/r", Methods: []string{"POST"}, Write: false}})
	f.Fuzz(func(t *testing.T, raw []byte, mode byte) {
		fl.set(mode)
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.DisableNormalizing()
		if err := ctx.Request.Read(bufio.NewReader(bytes.NewReader(raw))); err != nil {
			return // the server answers 400 before the handler runs
		}
		if ctx.IsConnect() {
			return
		}
		x := newExchange(p, &ctx)
		defer x.finish()
		if e := x.decide(); e != nil {
			return
		}
		x.req = fasthttp.AcquireRequest()
		if e := x.stamp(); e != nil {
			return
		}
		checkForwarded(t, fl, mode, x)
	})
}

// checkForwarded checks the safety properties of a request the proxy
// would forward: a write only with a current lease; a stamped request
// carries exactly one token (the current epoch), task and holder, and no
// worker-sent X-Fencing-* or hop-by-hop header.
func checkForwarded(t *testing.T, fl *fuzzLeases, mode byte, d *exchange) {
	req := d.req
	// Forwarded. Property 1: a write only with a current lease.
	l, why := fl.Check("task")
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
// read inside a fenced CONNECT tunnel (plain or intercepted TLS): the
// entry names the CONNECT authority (package tunnel has already checked
// the Host against it), then the same decide and build as a proxied
// request. Besides the properties of FuzzProxyRequest, whatever the
// request says, it goes to the CONNECT authority and nowhere else, over
// TLS exactly when the tunnel was TLS.
func FuzzTunnelRequest(f *testing.F) {
	seeds := []string{
		"POST /x HTTP/1.1\r\nHost: up.example\r\nContent-Length: 1\r\n\r\nx",
		"POST /x HTTP/1.1\r\nHost: up.example:443\r\nX-Fencing-Token: 9\r\n\r\n",
		"GET /r?q HTTP/1.1\r\nHost: other.example\r\n\r\n",
		"POST http://up.example/x HTTP/1.1\r\nHost: up.example\r\n\r\n",
		"POST https://evil.example/x HTTP/1.1\r\nHost: up.example\r\n\r\n",
		"PUT x HTTP/1.1\r\nHost: up.example\r\n\r\n",
		"DELETE /a/../b HTTP/1.1\r\nHost: UP.EXAMPLE\r\nConnection: close, X-A\r\nX-A: 1\r\n\r\n",
		"POST /x HTTP/1.1\r\nHost: up.example:8443\r\nProxy-Authorization: Basic dGFzazo=\r\n\r\n",
	}
	p, fl := newFuzzPath(f, seeds, 8, nil)
	f.Fuzz(func(t *testing.T, raw []byte, mode byte) {
		fl.set(mode)
		in := Entry{Authority: "up.example:443", TLS: mode&4 != 0}
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.DisableNormalizing()
		if err := ctx.Request.Read(bufio.NewReader(bytes.NewReader(raw))); err != nil {
			return
		}
		if ctx.IsConnect() {
			return // package tunnel refuses a CONNECT inside a tunnel
		}
		d := &exchange{p: p, ctx: &ctx, in: in}
		defer d.finish()
		if e := d.decide(); e != nil {
			return
		}
		if d.tgt.host != "up.example" || d.tgt.hostPort != "up.example:443" {
			t.Fatalf("a tunnel to up.example:443 forwards to %q", d.tgt.hostPort)
		}
		if (d.tgt.tls != nil) != in.TLS {
			t.Fatalf("tunnel TLS %v, upstream TLS %v", in.TLS, d.tgt.tls != nil)
		}
		d.req = fasthttp.AcquireRequest()
		if e := d.stamp(); e != nil {
			return
		}
		if h := string(d.req.URI().Host()); h != "up.example:443" && h != "up.example" {
			t.Fatalf("upstream request goes to %q", h)
		}
		checkForwarded(t, fl, mode, d)
	})
}

// fuzzLeases answers for the lease of "task" in one of four states,
// set by mode: current (a new epoch each time), past its deadline,
// revoked, or never granted.
type fuzzLeases struct {
	epoch uint64
	why   leases.Reason
	n     uint64 // writes since the checkpoint
}

func (fl *fuzzLeases) set(mode byte) {
	fl.epoch++
	fl.n = 0
	fl.why = [4]leases.Reason{"", leases.ReasonExpired, leases.ReasonRevoked, leases.ReasonNone}[mode%4]
}

func (fl *fuzzLeases) Check(taskID string) (leases.Ref, leases.Reason) {
	if fl.why != "" || (taskID != "" && taskID != "task") {
		return leases.Ref{TaskID: taskID}, cmp.Or(fl.why, leases.ReasonNone)
	}
	return leases.Ref{TaskID: "task", Epoch: fl.epoch}, ""
}

func (fl *fuzzLeases) Recheck(l leases.Ref) (leases.Ref, leases.Reason) {
	now, why := fl.Check(l.TaskID)
	if why == "" && now.Epoch != l.Epoch {
		return now, leases.ReasonLost
	}
	return now, why
}

func (fl *fuzzLeases) TaskIDs() []string {
	if fl.why == leases.ReasonNone || fl.why == leases.ReasonRevoked {
		return nil
	}
	return []string{"task"}
}

func (fl *fuzzLeases) ReportBlocked(leases.Blocked) {}

func (fl *fuzzLeases) NextWrite(taskID string, epoch uint64) (uint64, uint64, bool) {
	if _, why := fl.Check(taskID); why != "" || epoch != fl.epoch {
		return 0, 0, false
	}
	fl.n++
	return 0, fl.n, true
}

func (fl *fuzzLeases) SessionFor(string) string                             { return "s1" }
func (fl *fuzzLeases) LostByCluster(string, uint64, error) bool             { return false }
func (fl *fuzzLeases) MarkProgress(task string) (leases.Ref, leases.Reason) { return fl.Check(task) }

// newFuzzPath seeds f with every seed in every mode below modes and
// builds a request path with rules over fuzzLeases.
func newFuzzPath(f *testing.F, seeds []string, modes byte, rules []WriteRule) (*Pipeline, *fuzzLeases) {
	for _, s := range seeds {
		for mode := byte(0); mode < modes; mode++ {
			f.Add([]byte(s), mode)
		}
	}
	fl := &fuzzLeases{}
	s := testSettings(f, proxytest.NewClock())
	s.WriteRules = rules
	p, err := New(s, fl)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(p.Close)
	return p, fl
}
