package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"

	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

// This file is the one place the sidecar writes responses: problems,
// upstream responses relayed to the worker, journal replays, and the
// mapping of an upstream failure to its problem.

// Problem replies with an RFC 9457 problem document.
func Problem(ctx *fasthttp.RequestCtx, status int, code, title, detail string, epoch uint64) {
	Send(ctx, &Reply{Status: status, Code: code, Title: title, Detail: detail, Epoch: epoch})
}

// Send replies with the problem of a refusal.
func Send(ctx *fasthttp.RequestCtx, e *Reply) {
	p := problem{Problem: api.Problem{
		Type:   api.ProblemTypeBase + e.Code,
		Title:  e.Title,
		Status: e.Status,
		Detail: e.Detail,
		Code:   e.Code,
		Epoch:  e.Epoch,
	}, Tasks: e.Tasks}
	b, _ := json.Marshal(p) // strings, ints and a string slice cannot fail
	ctx.Response.Reset()
	ctx.SetStatusCode(e.Status)
	ctx.SetContentType(api.ProblemContentType)
	ctx.Response.Header.Set("Cache-Control", "no-store")
	if e.Status >= 400 && e.Status < 500 {
		// SDKs (openai-python and others) retry 408, 409 and 429 unless
		// told not to; a sidecar refusal does not change on a retry.
		ctx.Response.Header.Set(HeaderShouldRetry, "false")
	}
	ctx.SetBody(b)
}

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

// upstreamProblem maps an upstream failure to its problem; it is the one
// place that does. write and l say whether a write's lease was cut while
// it was in flight (then the outcome is unknown, and says so).
func upstreamProblem(err error, stage upstreamStage, write bool, l Ref, cfg *Config, hostPort string) *Reply {
	var netErr net.Error
	cutMidFlight := write && l.Ticket.st != nil && l.Ticket.MayWrite(cfg.Clock.Now()) != ""
	switch {
	case stage == stageRequest && errors.Is(err, errLeaseCut):
		return &Reply{Status: fasthttp.StatusConflict, Code: CodeLeaseExpired, Title: "lease expired: write blocked",
			Detail: "the lease stopped being current before the write was sent; the upstream received no complete request",
			Epoch:  l.Epoch, Blocked: true, Why: ReasonExpired}
	case cutMidFlight:
		return &Reply{Status: fasthttp.StatusBadGateway, Code: CodeLeaseLostMid, Title: "lease lost while the write was in flight",
			Detail: "the upstream connection was closed when the lease stopped being current; the outcome is unknown, retry with the same Idempotency-Key under a new lease",
			Epoch:  l.Epoch}
	case errors.Is(err, fasthttp.ErrTimeout), errors.As(err, &netErr) && netErr.Timeout():
		return &Reply{Status: fasthttp.StatusGatewayTimeout, Code: CodeUpstreamTimeout, Title: "upstream timed out",
			Detail: fmt.Sprintf("%s made no progress for %v", hostPort, cfg.UpstreamTimeout)}
	case stage == stageRequest && errors.Is(err, fasthttp.ErrBodyTooLarge):
		return &Reply{Status: fasthttp.StatusBadGateway, Code: CodeTooLarge, Title: "upstream response too large",
			Detail: fmt.Sprintf("the response exceeds %d bytes", cfg.MaxResponseBody)}
	case tlsFailure(err) != "":
		return &Reply{Status: fasthttp.StatusBadGateway, Code: CodeUpstreamTLS, Title: "upstream TLS verification failed",
			Detail: fmt.Sprintf("%s: %s (the sidecar never sends a request over an unverified connection)", hostPort, tlsFailure(err))}
	case stage == stageBody:
		return &Reply{Status: fasthttp.StatusBadGateway, Code: CodeUpstreamError, Title: "upstream response cut short",
			Detail: fmt.Sprintf("%s: %v", hostPort, err)}
	default:
		return &Reply{Status: fasthttp.StatusBadGateway, Code: CodeUpstreamError, Title: "upstream request failed",
			Detail: fmt.Sprintf("%s: %v", hostPort, err)}
	}
}
