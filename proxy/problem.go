package proxy

import (
	"encoding/json"

	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/fence/api"
)

// Problem type tails of the sidecar (api.ProblemTypeBase + code). They
// are part of the worker-facing contract: scripts branch on them.
const (
	CodeLeaseExpired       = "lease-expired"
	CodeLeaseSuspect       = "lease-suspect"
	CodeLeaseRevoked       = "lease-revoked"
	CodeLeaseWaiting       = "lease-waiting"
	CodeNoLease            = "no-lease"
	CodeAmbiguousTask      = "task-ambiguous"
	CodeNotProxyRequest    = "not-proxy-request"
	CodeConnectFenced      = "connect-fenced"
	CodeBadRequest         = "bad-request"
	CodeUpgrade            = "upgrade-unsupported"
	CodeTooLarge           = "too-large"
	CodeHeaderTooLarge     = "header-too-large"
	CodeRequestTimeout     = "request-timeout"
	CodeUpstreamTimeout    = "upstream-timeout"
	CodeUpstreamError      = "upstream-error"
	CodeLeaseLostMid       = "lease-lost-in-flight"
	CodeNoSession          = "no-session"
	CodeClusterError       = "cluster-error"
	CodeNotFound           = "not-found"
	CodeMethod             = "method-not-allowed"
	CodeEffectInDoubt      = "effect-in-doubt"
	CodeJournalUnavailable = "journal-unavailable"
	CodeHostMismatch       = "host-mismatch"
	CodeUpstreamTLS        = "upstream-tls"
	// CodeWriteAlreadyPerformed: a previous owner already performed this
	// write (same Idempotency-Key) with a different payload.
	CodeWriteAlreadyPerformed = "write-already-performed"
)

// HeaderShouldRetry is the response header SDKs read before retrying;
// every 4xx problem of the sidecar carries "false".
const HeaderShouldRetry = "X-Should-Retry"

// writeProblem replies with an RFC 9457 problem document.
func writeProblem(ctx *fasthttp.RequestCtx, status int, code, title, detail string, epoch uint64) {
	p := api.Problem{
		Type:   api.ProblemTypeBase + code,
		Title:  title,
		Status: status,
		Detail: detail,
		Code:   code,
		Epoch:  epoch,
	}
	b, _ := json.Marshal(p) // a struct of strings and ints cannot fail
	ctx.Response.Reset()
	ctx.SetStatusCode(status)
	ctx.SetContentType(api.ProblemContentType)
	ctx.Response.Header.Set("Cache-Control", "no-store")
	if status >= 400 && status < 500 {
		// SDKs (openai-python and others) retry 408, 409 and 429 unless
		// told not to; a sidecar refusal does not change on a retry.
		ctx.Response.Header.Set(HeaderShouldRetry, "false")
	}
	ctx.SetBody(b)
}
