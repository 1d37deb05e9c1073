package request

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/leases"
	"github.com/fencepost/fencepost/proxy/reply"
)

// This file is the one place the sidecar writes responses: problems,
// upstream responses relayed to the worker, journal replays, and the
// mapping of an upstream failure to its problem.

// writeUpstream starts the worker's response from an upstream one: its
// status and end-to-end headers. The caller sets the body.
func writeUpstream(ctx *fasthttp.RequestCtx, resp *fasthttp.Response) {
	ctx.Response.Header.DisableNormalizing()
	ctx.Response.Header.SetNoDefaultContentType(true)
	ctx.SetStatusCode(resp.StatusCode())
	copyResponseHeaders(&ctx.Response.Header, &resp.Header)
}

// replayEffect answers from a recorded outcome.
func replayEffect(ctx *fasthttp.RequestCtx, e *lease.Effect) {
	ctx.Response.Header.DisableNormalizing()
	ctx.Response.Header.SetNoDefaultContentType(true)
	ctx.SetStatusCode(e.Status)
	for k, vs := range e.Header {
		for _, v := range vs {
			ctx.Response.Header.Add(k, v)
		}
	}
	ctx.Response.Header.Set(fence.HeaderReplayed, "true")
	ctx.SetBody(e.Body)
}

// upstreamStage says how far an exchange got when the upstream failed.
type upstreamStage uint8

const (
	// stageRequest: sending the request or waiting for the response
	// header. A lease cut here means the request never left complete.
	stageRequest upstreamStage = iota
	// stageBody: reading a response body the worker has not been sent yet.
	stageBody
)

// cutReason is why a write's lease stopped it before it was sent: what
// the lease says now (revoked, lost, suspect...), so the worker gets the
// same problem as a write blocked at the door; expired when the lease no
// longer says (its state was forgotten).
func cutReason(l leases.Ref, now time.Time) leases.Reason {
	if why := l.Ticket.MayWrite(now); why != leases.ReasonNone {
		return why
	}
	return leases.ReasonExpired
}

// upstreamProblem maps an upstream failure to its problem; it is the one
// place that does. write and l say whether a write's lease was cut while
// it was in flight (then the outcome is unknown, and says so).
func upstreamProblem(err error, stage upstreamStage, write bool, l leases.Ref, cfg *Settings, hostPort string) *reply.Reply {
	var netErr net.Error
	cutMidFlight := write && !l.Ticket.IsZero() && l.Ticket.MayWrite(cfg.Clock.Now()) != ""
	switch {
	case stage == stageRequest && errors.Is(err, errLeaseCut):
		why := cutReason(l, cfg.Clock.Now())
		code, title := blockedProblem(why)
		return &reply.Reply{Code: code, Title: title,
			Detail: "the lease stopped being current before the write was sent; the upstream received no complete request",
			Epoch:  l.Epoch, Blocked: true, Why: string(why)}
	case cutMidFlight:
		return &reply.Reply{Code: reply.CodeLeaseLostMid, Title: "lease lost while the write was in flight",
			Detail: "the upstream connection was closed when the lease stopped being current; the outcome is unknown, retry with the same Idempotency-Key under a new lease",
			Epoch:  l.Epoch}
	case errors.Is(err, fasthttp.ErrTimeout), errors.As(err, &netErr) && netErr.Timeout():
		return &reply.Reply{Code: reply.CodeUpstreamTimeout, Title: "upstream timed out",
			Detail: fmt.Sprintf("%s made no progress for %v", hostPort, cfg.UpstreamTimeout)}
	case stage == stageRequest && errors.Is(err, fasthttp.ErrBodyTooLarge):
		return &reply.Reply{Code: reply.CodeUpstreamTooLarge, Title: "upstream response too large",
			Detail: fmt.Sprintf("the response exceeds %d bytes", cfg.MaxResponseBody)}
	case tlsFailure(err) != "":
		return &reply.Reply{Code: reply.CodeUpstreamTLS, Title: "upstream TLS verification failed",
			Detail: fmt.Sprintf("%s: %s (the sidecar never sends a request over an unverified connection)", hostPort, tlsFailure(err))}
	case stage == stageBody:
		return &reply.Reply{Code: reply.CodeUpstreamError, Title: "upstream response cut short",
			Detail: fmt.Sprintf("%s: %v", hostPort, err)}
	default:
		return &reply.Reply{Code: reply.CodeUpstreamError, Title: "upstream request failed",
			Detail: fmt.Sprintf("%s: %v", hostPort, err)}
	}
}
