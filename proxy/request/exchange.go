package request

import (
	"fmt"
	"sync/atomic"

	"github.com/fencepost/fencepost/fence/fenceotel"
	"github.com/fencepost/fencepost/proxy/leases"
	"github.com/fencepost/fencepost/proxy/proxytrace"
	"github.com/fencepost/fencepost/proxy/reply"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
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
	ownPorts []uint16
	// forbidden are the cluster's and the configured refused targets in
	// canonical form (reach.go), built once by New.
	forbidden []forbidden
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
	span   proxytrace.Request // the request's span; zero when tracing is off
}

// finish releases what the exchange still owns and ends its span (at the
// response's header: a streamed body is relayed after the handler).
func (x *exchange) finish() {
	x.span.End(x.ctx.Response.StatusCode())
	if x.resp != nil {
		_ = x.resp.CloseBodyStream()
		fasthttp.ReleaseResponse(x.resp)
	}
	if x.req != nil {
		fasthttp.ReleaseRequest(x.req)
	}
	x.req, x.resp = nil, nil
}

// refuse answers a refused request, counts it and records it on the span.
func (x *exchange) refuse(e *reply.Reply) {
	switch {
	case e.Blocked:
		x.span.Lease(e.Task, 0)
		x.span.Blocked(e.Why, e.Epoch)
	case e.Code == reply.CodeEffectInDoubt:
		x.span.Decision(fenceotel.DecisionInDoubt)
	}
	x.p.refuse(x.ctx, e, &x.span)
}

// Refuse answers a request refused outside the request path (a CONNECT,
// a tunnel's request before it enters) and counts it.
func (p *Pipeline) Refuse(ctx *fasthttp.RequestCtx, e *reply.Reply) {
	p.refuse(ctx, e, nil)
}

// refuse is Refuse with the span whose ids a block's log line carries
// (nil: none).
func (p *Pipeline) refuse(ctx *fasthttp.RequestCtx, e *reply.Reply, span *proxytrace.Request) {
	if e.Blocked {
		p.metrics.requests.WithLabelValues(DecisionBlocked).Inc()
		p.metrics.writesBlocked.WithLabelValues(string(e.Why)).Inc()
		// Task, host and path say which call of which task was stopped;
		// the query and the body may carry secrets and are never logged.
		if ce := p.log.Check(zap.InfoLevel, "request blocked"); ce != nil {
			ce.Write(span.LogFields(zap.String("reason", string(e.Why)), zap.String("task", e.Task), zap.Uint64("epoch", e.Epoch),
				zap.ByteString("method", ctx.Method()), zap.ByteString("host", ctx.URI().Host()), zap.ByteString("path", ctx.Path()))...)
		}
		if e.Task != "" && e.Epoch != 0 {
			p.keeper.ReportBlocked(leases.Blocked{TaskID: e.Task, Epoch: e.Epoch, Reason: leases.Reason(e.Why),
				Method: string(ctx.Method()), URL: string(ctx.URI().Host()) + string(ctx.Path()), TraceID: span.TraceID(&ctx.Request.Header)})
		}
	} else {
		p.metrics.requests.WithLabelValues(DecisionRejected).Inc()
	}
	reply.Send(ctx, e)
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
	e := &reply.Reply{Code: code, Title: title, Epoch: l.Epoch, Blocked: true, Why: string(why), Task: name}
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
