package request

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/proxy/conns"
	"github.com/fencepost/fencepost/proxy/leases"
	"github.com/fencepost/fencepost/proxy/reply"
)

// Pipeline is the one path every proxied request takes, whatever way it
// came in (DESIGN.md 6 and 11): parse the target, select the task,
// classify, decide, stamp, journal, forward, relay. serve runs those
// steps for one request; an exchange carries the request through them.
//
// A new way in (a CONNECT tunnel carrying plain HTTP, intercepted TLS)
// serves the requests it reads — with a fasthttp.Server over the tunnel's
// net.Conn, say — by calling Serve with an Entry naming the tunnel's
// authority; everything after that is the same code.
type Pipeline struct {
	cfg          *Settings
	keeper       Leases
	up           *upstream
	rules        []WriteRule
	journal      Journal // nil unless Settings.JournalRules has rules
	journalRules []WriteRule
	metrics      *metrics
	log          *zap.Logger
	inflight     atomic.Int64 // requests and response relays in progress
	// ownPorts are the sidecar's bound ports (proxy, control, metrics),
	// which RefuseSelfTarget refuses. SetOwnPorts sets them before the
	// sidecar serves, and they never change after.
	ownPorts []string
}

// exchange is one proxied request and its response. It owns the upstream
// request and response from their acquisition to the one release in
// finish, unless the relay takes both over to stream a body after the
// handler returns; then the relay releases them once, in Close.
type exchange struct {
	p      *Pipeline
	ctx    *fasthttp.RequestCtx
	in     Entry
	scan   reqScan
	tgt    target
	write  bool
	task   string
	lease  leases.Ref
	leased bool      // the lease is current: the request is stamped
	key    keyOrigin // how a write's Idempotency-Key was derived
	req    *fasthttp.Request
	resp   *fasthttp.Response
}

// Serve runs one request through every step.
func (p *Pipeline) Serve(ctx *fasthttp.RequestCtx, in Entry) {
	p.inflight.Add(1)
	defer p.inflight.Add(-1)
	x := exchange{p: p, ctx: ctx, in: in}
	defer x.finish()
	if e := x.decide(); e != nil {
		x.refuse(e)
		return
	}
	x.req = fasthttp.AcquireRequest()
	if e := x.stamp(); e != nil {
		x.refuse(e)
		return
	}
	if x.write && x.leased && p.journal != nil && p.journaled(string(ctx.Method()), x.tgt) {
		x.forwardJournaled()
		return
	}
	x.forward()
}

// finish releases what the exchange still owns.
func (x *exchange) finish() {
	if x.resp != nil {
		_ = x.resp.CloseBodyStream()
		fasthttp.ReleaseResponse(x.resp)
	}
	if x.req != nil {
		fasthttp.ReleaseRequest(x.req)
	}
	x.req, x.resp = nil, nil
}

// Expect refuses an "Expect: 100-continue" request that came in by in
// before its body is uploaded when it would be refused anyway.
func (p *Pipeline) Expect(ctx *fasthttp.RequestCtx, in Entry) int {
	x := exchange{p: p, ctx: ctx, in: in}
	if e := x.decide(); e != nil {
		x.refuse(e)
		return e.Status
	}
	return fasthttp.StatusContinue
}

// decide runs every step that needs only the request line and headers:
// framing, target, task selection, classification and the lease.
func (x *exchange) decide() *reply.Reply {
	x.scan = scanRequest(&x.ctx.Request.Header)
	if x.scan.hasCL > 1 || (x.scan.hasCL > 0 && x.scan.hasTE) {
		return &reply.Reply{Status: 400, Code: reply.CodeBadRequest, Title: "ambiguous message framing",
			Detail: "a request may carry one Content-Length, or Transfer-Encoding, not both or several"}
	}
	if x.scan.upgrade {
		return &reply.Reply{Status: fasthttp.StatusNotImplemented, Code: reply.CodeUpgrade, Title: "protocol upgrade not supported",
			Detail: "the sidecar forwards HTTP/1.1 only; Upgrade (WebSocket, h2c) cannot be fenced. Use CONNECT to an allow-listed host"}
	}
	tgt, e := parseTarget(x.ctx, x.in, x.p.up.origins)
	if e != nil {
		return e
	}
	if e := x.p.RefuseSelfTarget(splitHostPortOrEmpty(tgt.hostPort)); e != nil {
		return e
	}
	x.tgt = tgt
	task, err := selectedTask(&x.scan)
	if err == nil && x.in.Task != "" {
		if task != "" && task != x.in.Task {
			err = fmt.Errorf("the tunnel is for task %q, the request names %q", x.in.Task, task)
		}
		task = x.in.Task
	}
	if err != nil {
		return &reply.Reply{Status: 400, Code: reply.CodeBadRequest, Title: "bad task selection", Detail: err.Error()}
	}
	x.task = task
	x.write = isWrite(x.p.rules, string(x.ctx.Method()), x.tgt)
	l, why := x.p.keeper.Check(task)
	if why == "" {
		x.lease, x.leased = l, true
		return nil
	}
	if x.write || x.p.cfg.ReadsWithoutLease == ReadsBlock {
		return x.p.Blocked(why, l, task, x.write)
	}
	return nil
}

// Blocked is the refusal of a request for want of a current lease.
func (p *Pipeline) Blocked(why leases.Reason, l leases.Ref, task string, write bool) *reply.Reply {
	code, title := blockedProblem(why)
	what := "write"
	if !write {
		what = "read (reads without a lease are blocked by policy)"
	}
	name := l.TaskID
	if name == "" {
		name = task
	}
	e := &reply.Reply{Status: fasthttp.StatusConflict, Code: code, Title: title, Epoch: l.Epoch, Blocked: true, Why: string(why)}
	switch {
	case why == leases.ReasonAmbig:
		e.Tasks = p.keeper.TaskIDs()
		e.Detail = fmt.Sprintf("the sidecar holds leases on %d tasks %q; name the one this %s is for with the proxy user name "+
			"(HTTP_PROXY=http://<taskId>@127.0.0.1:PORT) or the %s header", len(e.Tasks), e.Tasks, what, HeaderTaskSelect)
	case name == "":
		e.Detail = fmt.Sprintf("the sidecar holds no current lease, so this %s was not sent", what)
	default:
		e.Detail = fmt.Sprintf("the sidecar holds no current lease for task %q, so this %s was not sent", name, what)
	}
	return e
}

// blockedProblem returns the problem code and title of a request blocked
// for reason r.
func blockedProblem(r leases.Reason) (code, title string) {
	switch r {
	case leases.ReasonExpired:
		return reply.CodeLeaseExpired, "lease expired: write blocked"
	case leases.ReasonSuspect:
		return reply.CodeLeaseSuspect, "lease suspect: write blocked until the heartbeat gets through"
	case leases.ReasonRevoked:
		return reply.CodeLeaseRevoked, "lease revoked: write blocked"
	case leases.ReasonWaiting:
		return reply.CodeLeaseWaiting, "task is waiting: write blocked"
	case leases.ReasonAmbig:
		return reply.CodeAmbiguousTask, "several leases held: name the task"
	default:
		return reply.CodeNoLease, "no lease for this task: write blocked"
	}
}

// stamp writes the upstream request: target URL, forwardable headers,
// body, and for a current lease one set of fencing headers and (for
// writes) the Idempotency-Key. The lease is asked again here,
// immediately before the send.
func (x *exchange) stamp() *reply.Reply {
	req, ctx := x.req, x.ctx
	req.Header.DisableNormalizing()
	req.Header.SetNoDefaultContentType(true)
	req.Header.SetMethodBytes(ctx.Method())
	copyRequestHeaders(&req.Header, &ctx.Request.Header, &x.scan)
	x.tgt.setUpstream(req, ctx, x.in)
	req.SetBodyRaw(ctx.Request.Body())
	if len(x.scan.idemKey) > 1 {
		return &reply.Reply{Status: 400, Code: reply.CodeBadRequest, Title: "bad idempotency key", Detail: "repeated Idempotency-Key"}
	}
	if len(x.scan.idemKey) == 1 {
		// The worker's own key always passes unchanged (validated below
		// for writes, which depend on it).
		req.Header.Set(fence.HeaderIdempotencyKey, x.scan.idemKey[0])
	}
	if !x.leased {
		return nil
	}
	// Re-check: the lease may have ended while the body was read.
	l, why := x.p.keeper.Recheck(x.lease)
	if why != "" {
		if x.write || x.p.cfg.ReadsWithoutLease == ReadsBlock {
			return x.p.Blocked(why, l, x.task, x.write)
		}
		x.leased = false
		return nil
	}
	x.lease = l
	stampHeaders(&req.Header, l, x.p.cfg.WorkerID)
	x.p.limitSignature(&req.Header, x.tgt.hostPort)
	if x.write {
		key, origin, ok, err := x.p.idempotencyKey(&x.scan, l)
		if err != nil {
			return &reply.Reply{Status: 400, Code: reply.CodeBadRequest, Title: "bad idempotency key", Detail: err.Error()}
		}
		if !ok {
			return x.p.Blocked(leases.ReasonLost, l, x.task, true)
		}
		req.Header.Set(fence.HeaderIdempotencyKey, key)
		x.key = origin
	}
	return nil
}

// refuse answers a refused request and counts it.
func (x *exchange) refuse(e *reply.Reply) {
	x.p.Refuse(x.ctx, e)
}

func (p *Pipeline) Refuse(ctx *fasthttp.RequestCtx, e *reply.Reply) {
	if e.Blocked {
		p.metrics.requests.WithLabelValues(DecisionBlocked).Inc()
		p.metrics.writesBlocked.WithLabelValues(string(e.Why)).Inc()
		if ce := p.log.Check(zap.InfoLevel, "request blocked"); ce != nil {
			ce.Write(zap.String("reason", string(e.Why)), zap.ByteString("method", ctx.Method()), zap.Uint64("epoch", e.Epoch))
		}
	} else {
		p.metrics.requests.WithLabelValues(DecisionRejected).Inc()
	}
	reply.Send(ctx, e)
}

// ParseError answers requests fasthttp could not parse.
func (p *Pipeline) ParseError(ctx *fasthttp.RequestCtx, err error) {
	conns.MarkLinger(ctx.Conn())
	var sizeErr *fasthttp.ErrSmallBuffer
	var netErr net.Error
	e := &reply.Reply{Status: fasthttp.StatusBadRequest, Code: reply.CodeBadRequest, Title: "malformed request", Detail: err.Error()}
	switch {
	case errors.As(err, &sizeErr):
		e = &reply.Reply{Status: fasthttp.StatusRequestHeaderFieldsTooLarge, Code: reply.CodeHeaderTooLarge,
			Title: "request header too large", Detail: fmt.Sprintf("the header block exceeds %d bytes", p.cfg.MaxHeaderBytes)}
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		e = &reply.Reply{Status: fasthttp.StatusRequestEntityTooLarge, Code: reply.CodeTooLarge,
			Title: "request body too large", Detail: fmt.Sprintf("the body exceeds %d bytes", p.cfg.MaxRequestBody)}
	case errors.As(err, &netErr) && netErr.Timeout():
		e = &reply.Reply{Status: fasthttp.StatusRequestTimeout, Code: reply.CodeRequestTimeout,
			Title: "request not received in time", Detail: fmt.Sprintf("the whole request must arrive within %v", p.cfg.ReadTimeout)}
	}
	p.Refuse(ctx, e)
	ctx.SetConnectionClose()
}

// upstreamFailed answers a request whose upstream call failed at stage.
func (x *exchange) upstreamFailed(err error, stage upstreamStage) {
	p := x.p
	if stage == stageRequest {
		if errors.Is(err, errLeaseCut) {
			p.metrics.requests.WithLabelValues(DecisionBlocked).Inc()
			p.metrics.writesBlocked.WithLabelValues(string(leases.ReasonExpired)).Inc()
		} else {
			p.metrics.forwarded.Inc()
		}
	}
	if ce := p.log.Check(zap.InfoLevel, "upstream failed"); ce != nil {
		ce.Write(zap.String("host", x.tgt.hostPort), zap.Bool("write", x.write), zap.Bool("body", stage == stageBody), zap.Error(err))
	}
	e := upstreamProblem(err, stage, x.write, x.lease, p.cfg, x.tgt.hostPort)
	if e.Code == reply.CodeUpstreamError && stage == stageRequest {
		e.Detail += p.up.origins.portHint(x.tgt, x.tgt.tls != nil)
	}
	reply.Send(x.ctx, e)
}

// smallBody is the largest response body (with a Content-Length) the
// handler reads itself instead of handing fasthttp a relay to stream
// after the handler returns. Most tool-call answers are this small; for
// them the relay's allocation, the server's stream copy and holding the
// upstream connection until the worker has the reply cost more than
// the copy through a pooled buffer.
const smallBody = 4 << 10

// smallBufs holds the read buffers of forwardSmall (a stack array would
// escape through the io.Reader call).
var smallBufs = sync.Pool{New: func() any { return new([smallBody]byte) }}

// forward sends the request and relays the response, streaming its body
// unless it is small.
func (x *exchange) forward() {
	p, ctx := x.p, x.ctx
	latency := p.metrics.upstreamRead
	var t leases.Ticket // a write's lease generation: its relay stops when it ends
	if x.write {
		latency, t = p.metrics.upstreamWrite, x.lease.Ticket
	}
	client, err := p.up.client(x.write, t)
	if err != nil {
		x.upstreamFailed(err, stageRequest)
		return
	}
	x.resp = fasthttp.AcquireResponse()
	resp := x.resp
	if ctx.IsHead() {
		resp.SkipBody = true
	}
	start := time.Now()
	if err := client.Do(x.req, resp); err != nil {
		x.upstreamFailed(err, stageRequest)
		return
	}
	latency.Observe(time.Since(start).Seconds())
	p.metrics.forwarded.Inc()
	status := resp.StatusCode()
	size := resp.Header.ContentLength()
	bs := resp.BodyStream()
	noBody := ctx.IsHead() || status < 200 || status == 204 || status == 304
	if bs != nil && size >= 0 && size <= smallBody && (p.cfg.MaxResponseBody <= 0 || int64(size) <= p.cfg.MaxResponseBody) && !noBody {
		x.forwardSmall(t, size)
		return
	}
	writeUpstream(ctx, resp)
	switch {
	case noBody:
		if ctx.IsHead() && size >= 0 {
			ctx.Response.Header.SetContentLength(size)
		}
		ctx.Response.SkipBody = true
	case bs != nil:
		// The relay outlives the handler and takes the request and the
		// response over; drop the request's reference to the worker's
		// body buffer, which fasthttp reuses.
		x.req.ResetBody()
		p.inflight.Add(1)
		r := &relay{p: p, r: bs, resp: resp, req: x.req, max: p.cfg.MaxResponseBody, t: t, clock: p.cfg.Clock}
		x.req, x.resp = nil, nil
		if size < 0 {
			size = -1 // chunked or until close: relay chunked, flushing each piece
		}
		ctx.SetBodyStream(r, size)
	default:
		ctx.SetBody(resp.Body())
	}
}

// forwardSmall reads a small body with a known length in the handler,
// with the relay's checks (a write whose lease ended stops it), returns
// the upstream connection to the pool and answers from a buffer. A body
// that cannot be read in full is a 502 problem rather than a reply cut
// off after its header, since nothing has been sent to the worker yet.
func (x *exchange) forwardSmall(t leases.Ticket, size int) {
	bp := smallBufs.Get().(*[smallBody]byte)
	defer smallBufs.Put(bp)
	r := relay{r: x.resp.BodyStream(), t: t, clock: x.p.cfg.Clock}
	n, err := readFull(&r, bp[:size])
	_ = x.resp.CloseBodyStream()
	if err != nil {
		x.upstreamFailed(err, stageBody)
		return
	}
	if x.explainTakeover(bp[:n]) {
		return
	}
	writeUpstream(x.ctx, x.resp)
	x.ctx.SetBody(bp[:n])
}
