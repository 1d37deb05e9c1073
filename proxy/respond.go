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

// writeProblem replies with an RFC 9457 problem document.
func writeProblem(ctx *fasthttp.RequestCtx, status int, code, title, detail string, epoch uint64) {
	writeReply(ctx, &errReply{status: status, code: code, title: title, detail: detail, epoch: epoch})
}

// writeReply replies with the problem of a refusal.
func writeReply(ctx *fasthttp.RequestCtx, e *errReply) {
	p := problem{Problem: api.Problem{
		Type:   api.ProblemTypeBase + e.code,
		Title:  e.title,
		Status: e.status,
		Detail: e.detail,
		Code:   e.code,
		Epoch:  e.epoch,
	}, Tasks: e.tasks}
	b, _ := json.Marshal(p) // strings, ints and a string slice cannot fail
	ctx.Response.Reset()
	ctx.SetStatusCode(e.status)
	ctx.SetContentType(api.ProblemContentType)
	ctx.Response.Header.Set("Cache-Control", "no-store")
	if e.status >= 400 && e.status < 500 {
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
func upstreamProblem(err error, stage upstreamStage, write bool, l leaseRef, cfg *Config, hostPort string) *errReply {
	var netErr net.Error
	cutMidFlight := write && l.t.st != nil && l.t.mayWrite(cfg.Clock.Now()) != ""
	switch {
	case stage == stageRequest && errors.Is(err, errLeaseCut):
		return &errReply{status: fasthttp.StatusConflict, code: CodeLeaseExpired, title: "lease expired: write blocked",
			detail: "the lease stopped being current before the write was sent; the upstream received no complete request",
			epoch:  l.Epoch, blocked: true, why: reasonExpired}
	case cutMidFlight:
		return &errReply{status: fasthttp.StatusBadGateway, code: CodeLeaseLostMid, title: "lease lost while the write was in flight",
			detail: "the upstream connection was closed when the lease stopped being current; the outcome is unknown, retry with the same Idempotency-Key under a new lease",
			epoch:  l.Epoch}
	case errors.Is(err, fasthttp.ErrTimeout), errors.As(err, &netErr) && netErr.Timeout():
		return &errReply{status: fasthttp.StatusGatewayTimeout, code: CodeUpstreamTimeout, title: "upstream timed out",
			detail: fmt.Sprintf("%s made no progress for %v", hostPort, cfg.UpstreamTimeout)}
	case stage == stageRequest && errors.Is(err, fasthttp.ErrBodyTooLarge):
		return &errReply{status: fasthttp.StatusBadGateway, code: CodeTooLarge, title: "upstream response too large",
			detail: fmt.Sprintf("the response exceeds %d bytes", cfg.MaxResponseBody)}
	case tlsFailure(err) != "":
		return &errReply{status: fasthttp.StatusBadGateway, code: CodeUpstreamTLS, title: "upstream TLS verification failed",
			detail: fmt.Sprintf("%s: %s (the sidecar never sends a request over an unverified connection)", hostPort, tlsFailure(err))}
	case stage == stageBody:
		return &errReply{status: fasthttp.StatusBadGateway, code: CodeUpstreamError, title: "upstream response cut short",
			detail: fmt.Sprintf("%s: %v", hostPort, err)}
	default:
		return &errReply{status: fasthttp.StatusBadGateway, code: CodeUpstreamError, title: "upstream request failed",
			detail: fmt.Sprintf("%s: %v", hostPort, err)}
	}
}
