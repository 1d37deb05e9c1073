package request

import (
	"errors"
	"fmt"
	"net"

	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/proxy/conns"
	"github.com/fencepost/fencepost/proxy/leases"
	"github.com/fencepost/fencepost/proxy/reply"
)

// Serve runs one request through every step.
func (p *Pipeline) Serve(ctx *fasthttp.RequestCtx, in Entry) {
	p.inflight.Add(1)
	defer p.inflight.Add(-1)
	x := exchange{p: p, ctx: ctx, in: in}
	defer x.finish()
	if p.cfg.Tracer != nil {
		x.span = p.cfg.Tracer.Start(ctx, in.traceEntry())
	}
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

// Expect refuses an "Expect: 100-continue" request that came in by in
// before its body is uploaded when it would be refused anyway.
func (p *Pipeline) Expect(ctx *fasthttp.RequestCtx, in Entry) int {
	x := exchange{p: p, ctx: ctx, in: in}
	if e := x.decide(); e != nil {
		x.refuse(e)
		return reply.StatusOf(e.Code)
	}
	return fasthttp.StatusContinue
}

// decide runs every step that needs only the request line and headers:
// framing, target, task selection, classification and the lease.
func (x *exchange) decide() *reply.Reply {
	x.scan = scanRequest(&x.ctx.Request.Header)
	if x.scan.hasCL > 1 || (x.scan.hasCL > 0 && x.scan.hasTE) {
		return &reply.Reply{Code: reply.CodeBadRequest, Title: "ambiguous message framing",
			Detail: "a request may carry one Content-Length, or Transfer-Encoding, not both or several"}
	}
	if x.scan.upgrade {
		return &reply.Reply{Code: reply.CodeUpgrade, Title: "protocol upgrade not supported",
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
	x.span.Target(tgt.tls != nil, tgt.uri, tgt.hostPort)
	task, err := selectedTask(&x.scan)
	if err == nil && x.in.Task != "" {
		if task != "" && task != x.in.Task {
			err = fmt.Errorf("the tunnel is for task %q, the request names %q", x.in.Task, task)
		}
		task = x.in.Task
	}
	if err != nil {
		return &reply.Reply{Code: reply.CodeBadRequest, Title: "bad task selection", Detail: err.Error()}
	}
	x.task = task
	x.write = isWrite(x.p.rules, string(x.ctx.Method()), x.tgt)
	l, why := x.p.keeper.Check(task)
	if task != "" {
		x.span.Lease(task, 0)
	} else {
		x.span.Lease(l.TaskID, 0) // the one lease the sidecar holds, if any
	}
	if why == "" {
		x.lease, x.leased = l, true
		return nil
	}
	if x.write || x.p.cfg.ReadsWithoutLease == ReadsBlock {
		return x.p.Blocked(why, l, task, x.write)
	}
	return nil
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
	x.span.Inject(&req.Header) // the upstream's parent is the sidecar's span
	x.tgt.setUpstream(req, ctx, x.in)
	req.SetBodyRaw(ctx.Request.Body())
	if len(x.scan.idemKey) > 1 {
		return &reply.Reply{Code: reply.CodeBadRequest, Title: "bad idempotency key", Detail: "repeated Idempotency-Key"}
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
	x.span.Lease(l.TaskID, l.Epoch)
	stampHeaders(&req.Header, l, x.p.cfg.WorkerID)
	x.p.limitSignature(&req.Header, x.tgt.hostPort)
	if x.write {
		key, origin, ok, err := x.p.idempotencyKey(&x.scan, l)
		if err != nil {
			return &reply.Reply{Code: reply.CodeBadRequest, Title: "bad idempotency key", Detail: err.Error()}
		}
		if !ok {
			return x.p.Blocked(leases.ReasonLost, l, x.task, true)
		}
		req.Header.Set(fence.HeaderIdempotencyKey, key)
		x.key = origin
		x.span.IdempotencyKey(key)
	}
	return nil
}

// ParseError answers requests fasthttp could not parse.
func (p *Pipeline) ParseError(ctx *fasthttp.RequestCtx, err error) {
	conns.MarkLinger(ctx.Conn())
	var sizeErr *fasthttp.ErrSmallBuffer
	var netErr net.Error
	e := &reply.Reply{Code: reply.CodeBadRequest, Title: "malformed request", Detail: err.Error()}
	switch {
	case errors.As(err, &sizeErr):
		e = &reply.Reply{Code: reply.CodeHeaderTooLarge,
			Title: "request header too large", Detail: fmt.Sprintf("the header block exceeds %d bytes", p.cfg.MaxHeaderBytes)}
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		e = &reply.Reply{Code: reply.CodeTooLarge,
			Title: "request body too large", Detail: fmt.Sprintf("the body exceeds %d bytes", p.cfg.MaxRequestBody)}
	case errors.As(err, &netErr) && netErr.Timeout():
		e = &reply.Reply{Code: reply.CodeRequestTimeout,
			Title: "request not received in time", Detail: fmt.Sprintf("the whole request must arrive within %v", p.cfg.ReadTimeout)}
	}
	p.Refuse(ctx, e)
	ctx.SetConnectionClose()
}
