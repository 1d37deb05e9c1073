package reply

import (
	"encoding/json"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/fence/api"
)

// Problem type tails of the sidecar (api.ProblemTypeBase + code). They
// are part of the worker-facing contract: scripts branch on them.
const (
	CodeLeaseExpired    = "lease-expired"
	CodeLeaseSuspect    = "lease-suspect"
	CodeLeaseRevoked    = "lease-revoked"
	CodeLeaseWaiting    = "lease-waiting"
	CodeNoLease         = "no-lease"
	CodeAmbiguousTask   = "task-ambiguous"
	CodeNotProxyRequest = "not-proxy-request"
	CodeConnectFenced   = "connect-fenced"
	CodeBadRequest      = "bad-request"
	CodeUpgrade         = "upgrade-unsupported"
	// CodeTooLarge: the worker's request body exceeds max_request_body.
	CodeTooLarge = "too-large"
	// CodeUpstreamTooLarge: the upstream's response body exceeds
	// max_response_body (a bad gateway: the worker's request was fine).
	CodeUpstreamTooLarge = "upstream-too-large"
	CodeHeaderTooLarge   = "header-too-large"
	CodeRequestTimeout   = "request-timeout"
	CodeUpstreamTimeout  = "upstream-timeout"
	CodeUpstreamError    = "upstream-error"
	CodeLeaseLostMid     = "lease-lost-in-flight"
	CodeNoSession        = "no-session"
	CodeClusterError     = "cluster-error"
	// CodeClusterTimeout: a control call's cluster round ran out of time.
	CodeClusterTimeout     = "cluster-timeout"
	CodeNotFound           = "not-found"
	CodeMethod             = "method-not-allowed"
	CodeEffectInDoubt      = "effect-in-doubt"
	CodeJournalUnavailable = "journal-unavailable"
	CodeHostMismatch       = "host-mismatch"
	CodeUpstreamTLS        = "upstream-tls"
	// CodeWriteAlreadyPerformed: a previous owner already performed this
	// write (same Idempotency-Key) with a different payload.
	CodeWriteAlreadyPerformed = "write-already-performed"
	// CodeSelfTarget: a proxied request aimed at the lease cluster or at
	// one of the sidecar's own ports (refuseSelfTarget).
	CodeSelfTarget = "target-forbidden"
	// CodeControlRefused: a control request refused before routing: not
	// JSON, a Host that is not loopback, or a foreign Origin (controlGuard).
	CodeControlRefused = "control-refused"
	// CodeControlNotJSON: a control POST whose Content-Type is not
	// application/json (which a cross-site form cannot send).
	CodeControlNotJSON = "control-not-json"
	// CodeInternal: the sidecar broke one of its own rules (a bug).
	CodeInternal = "internal"
)

// HeaderShouldRetry is the response header SDKs read before retrying;
// every 4xx problem of the sidecar carries "false".
const HeaderShouldRetry = "X-Should-Retry"

// Reply is a refusal with its problem. Its HTTP status is its code's
// (StatusOf): a refusal names what went wrong, never a status.
type Reply struct {
	Code    string
	Title   string
	Detail  string
	Epoch   uint64
	Tasks   []string // the held tasks, when the refusal asks the caller to choose
	Blocked bool     // for want of a lease (else rejected as bad input)
	Why     string   // when blocked: the lease's reason, a metric label
	Task    string   // when blocked: the task the request was for, for the log
}

// problem is the document a refusal is answered with: the RFC 9457
// fields, and the held tasks when the caller must choose one.
type problem struct {
	api.Problem
	Tasks []string `json:"tasks,omitempty"`
}

// Problem replies with an RFC 9457 problem document.
func Problem(ctx *fasthttp.RequestCtx, code, title, detail string, epoch uint64) {
	Send(ctx, &Reply{Code: code, Title: title, Detail: detail, Epoch: epoch})
}

// Send replies with the problem of a refusal.
func Send(ctx *fasthttp.RequestCtx, e *Reply) {
	status := StatusOf(e.Code)
	p := problem{Problem: api.Problem{
		Type:   api.ProblemTypeBase + e.Code,
		Title:  e.Title,
		Status: status,
		Detail: e.Detail,
		Code:   e.Code,
		Epoch:  e.Epoch,
	}, Tasks: e.Tasks}
	b, _ := json.Marshal(p) // strings, ints and a string slice cannot fail
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

// JSON replies 200 with v as JSON.
func JSON(ctx *fasthttp.RequestCtx, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		Problem(ctx, CodeInternal, "cannot encode reply", err.Error(), 0)
		return
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

// Quote quotes at most 100 bytes of untrusted input for a message.
func Quote(s string) string {
	if len(s) > 100 {
		s = s[:100] + "..."
	}
	// ASCII with Go escapes: a quote inside stays readable (\") and no
	// control byte reaches a status line or a log.
	return strconv.QuoteToASCII(s)
}
