package request

import (
	"errors"
	"sync"
	"time"

	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/fence/fenceotel"
	"github.com/fencepost/fencepost/proxy/leases"
	"github.com/fencepost/fencepost/proxy/reply"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
)

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
	status := resp.StatusCode()
	size := resp.Header.ContentLength()
	noBody := ctx.IsHead() || status < 200 || status == 204 || status == 304
	if !noBody && p.cfg.MaxResponseBody > 0 && int64(size) > p.cfg.MaxResponseBody {
		// Announced too large: refused before the worker is sent anything,
		// rather than a relay cut off at the bound after a 2xx header.
		x.upstreamFailed(fasthttp.ErrBodyTooLarge, stageRequest)
		return
	}
	latency.Observe(time.Since(start).Seconds())
	p.metrics.forwarded.Inc()
	x.span.Decision(fenceotel.DecisionForwarded)
	if x.write {
		x.logForwarded(status)
	}
	x.markProgress()
	bs := resp.BodyStream()
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

// logForwarded writes one line per forwarded write: which task, under
// which epoch and key, to which host and path, and what came back. Reads
// are not logged (they are many, and change nothing); the query and the
// body may carry secrets and are never logged.
func (x *exchange) logForwarded(status int) {
	if ce := x.p.log.Check(zap.InfoLevel, "write forwarded"); ce != nil {
		ce.Write(x.span.LogFields(zap.String("task", x.lease.TaskID), zap.Uint64("epoch", x.lease.Epoch),
			zap.ByteString("method", x.ctx.Method()), zap.String("host", x.tgt.hostPort), zap.String("path", x.tgt.normPath),
			zap.ByteString("key", x.req.Header.Peek(fence.HeaderIdempotencyKey)), zap.Int("status", status))...)
	}
}

// markProgress marks progress for the task of a call that was forwarded,
// when worker.progress_calls counts it: the upstream answered, so the
// worker did something. The mark is local; the next heartbeat carries it.
func (x *exchange) markProgress() {
	if x.write && x.p.cfg.ProgressOnWrites || !x.write && x.p.cfg.ProgressOnReads {
		if x.lease.TaskID != "" {
			x.p.keeper.MarkProgress(x.lease.TaskID)
		}
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

// upstreamFailed answers a request whose upstream call failed at stage.
func (x *exchange) upstreamFailed(err error, stage upstreamStage) {
	p := x.p
	if stage == stageRequest {
		if errors.Is(err, errLeaseCut) {
			p.metrics.requests.WithLabelValues(DecisionBlocked).Inc()
			p.metrics.writesBlocked.WithLabelValues(string(cutReason(x.lease, p.cfg.Clock.Now()))).Inc()
		} else {
			p.metrics.forwarded.Inc()
		}
	}
	if errors.Is(err, errLeaseCut) && stage == stageRequest {
		x.span.Blocked(string(cutReason(x.lease, p.cfg.Clock.Now())), x.lease.Epoch)
	} else {
		x.span.Failed(err)
	}
	if ce := p.log.Check(zap.InfoLevel, "upstream failed"); ce != nil {
		ce.Write(x.span.LogFields(zap.String("host", x.tgt.hostPort), zap.Bool("write", x.write), zap.Bool("body", stage == stageBody), zap.Error(err))...)
	}
	e := upstreamProblem(err, stage, x.write, x.lease, p.cfg, x.tgt.hostPort)
	if e.Code == reply.CodeUpstreamError && stage == stageRequest {
		e.Detail += p.up.origins.portHint(x.tgt, x.tgt.tls != nil)
	}
	reply.Send(x.ctx, e)
}
