package proxy

import "github.com/fencepost/fencepost/fence/api"

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
	// CodeSelfTarget: a proxied request aimed at the lease cluster or at
	// one of the sidecar's own ports (refuseSelfTarget).
	CodeSelfTarget = "target-forbidden"
	// CodeControlRefused: a control request refused before routing: not
	// JSON, a Host that is not loopback, or a foreign Origin (controlGuard).
	CodeControlRefused = "control-refused"
)

// HeaderShouldRetry is the response header SDKs read before retrying;
// every 4xx problem of the sidecar carries "false".
const HeaderShouldRetry = "X-Should-Retry"

// Reply is a refusal with its problem.
type Reply struct {
	Status  int
	Code    string
	Title   string
	Detail  string
	Epoch   uint64
	Tasks   []string // the held tasks, when the refusal asks the caller to choose
	Blocked bool     // for want of a lease (else rejected as bad input)
	Why     Reason   // when blocked
}

// problem is the document a refusal is answered with: the RFC 9457
// fields, and the held tasks when the caller must choose one.
type problem struct {
	api.Problem
	Tasks []string `json:"tasks,omitempty"`
}
