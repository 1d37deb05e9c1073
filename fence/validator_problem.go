package fence

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
)

// ProblemContentType is the media type of every rejection (RFC 9457).
const ProblemContentType = "application/problem+json"

// ProblemBase prefixes every problem type URI. The URIs are identifiers:
// stable across versions, compared as strings, not necessarily resolvable.
const ProblemBase = "https://fencepost.dev/problems/"

// Problem type URIs, one per rejection reason (SPEC.md section 4).
const (
	ProblemMissingToken       = ProblemBase + "missing-token"
	ProblemMalformedToken     = ProblemBase + "malformed-token"
	ProblemMissingTask        = ProblemBase + "missing-task"
	ProblemMalformedTask      = ProblemBase + "malformed-task"
	ProblemMalformedHolder    = ProblemBase + "malformed-holder"
	ProblemMissingSignature   = ProblemBase + "missing-signature"
	ProblemBadSignature       = ProblemBase + "bad-signature"
	ProblemUnknownKey         = ProblemBase + "unknown-key"
	ProblemScope              = ProblemBase + "scope-rejected"
	ProblemInvalidIdempotency = ProblemBase + "invalid-idempotency-key"
	ProblemBodyTooLarge       = ProblemBase + "body-too-large"
	ProblemStaleToken         = ProblemBase + "stale-token"
	ProblemInProgress         = ProblemBase + "idempotency-in-progress"
	ProblemPayloadMismatch    = ProblemBase + "idempotency-payload-mismatch"
	ProblemStoreFull          = ProblemBase + "store-full"
	ProblemStoreFailure       = ProblemBase + "store-failure"
	ProblemWriteFailed        = ProblemBase + "write-failed"
)

// problemRow is one row of the decision table: sentinel, type, status,
// title. Order matters only for documentation.
type problemRow struct {
	err    error
	typ    string
	status int
	title  string
}

var problemTable = []problemRow{
	{ErrMissingToken, ProblemMissingToken, http.StatusBadRequest, "Missing fencing token"},
	{ErrMalformedToken, ProblemMalformedToken, http.StatusBadRequest, "Malformed fencing token"},
	{ErrMissingTask, ProblemMissingTask, http.StatusBadRequest, "Missing task id"},
	{ErrMalformedTask, ProblemMalformedTask, http.StatusBadRequest, "Malformed task id"},
	{ErrMalformedHolder, ProblemMalformedHolder, http.StatusBadRequest, "Malformed holder id"},
	{ErrMissingSignature, ProblemMissingSignature, http.StatusForbidden, "Missing token signature"},
	{ErrBadSignature, ProblemBadSignature, http.StatusForbidden, "Bad token signature"},
	{ErrUnknownKey, ProblemUnknownKey, http.StatusForbidden, "Unknown signing key"},
	{ErrScope, ProblemScope, http.StatusForbidden, "Task not allowed here"},
	{ErrInvalidIdempotencyKey, ProblemInvalidIdempotency, http.StatusBadRequest, "Invalid Idempotency-Key"},
	{ErrBodyTooLarge, ProblemBodyTooLarge, http.StatusRequestEntityTooLarge, "Request body too large"},
	{ErrStale, ProblemStaleToken, http.StatusConflict, "Stale fencing token"},
	{ErrInProgress, ProblemInProgress, http.StatusConflict, "Idempotent request in progress"},
	{ErrPayloadMismatch, ProblemPayloadMismatch, http.StatusUnprocessableEntity, "Idempotency-Key reused with a different payload"},
	{ErrStoreFull, ProblemStoreFull, http.StatusServiceUnavailable, "Fencing store full"},
	{ErrStore, ProblemStoreFailure, http.StatusServiceUnavailable, "Fencing store failure"},
	{ErrWriteFailed, ProblemWriteFailed, http.StatusInternalServerError, "Write failed"},
}

// ProblemTypes lists every problem type URI the package produces, in the
// order of the decision table; metrics use it to pre-create label values.
func ProblemTypes() []string {
	out := make([]string, len(problemTable))
	for i, row := range problemTable {
		out[i] = row.typ
	}
	return out
}

// Problem is an RFC 9457 problem document.
type Problem struct {
	// Type is one of the Problem* URIs.
	Type string `json:"type"`
	// Title is a short, fixed summary of the type.
	Title string `json:"title"`
	// Status repeats the HTTP status code.
	Status int `json:"status"`
	// Detail explains this occurrence.
	Detail string `json:"detail,omitempty"`
	// MaxSeenEpoch is set on stale-token: the task's highest epoch, as a
	// decimal string (JSON numbers lose precision above 2^53).
	MaxSeenEpoch string `json:"max_seen_epoch,omitempty"`
}

// Reason is the last path segment of Type ("stale-token"): short, stable
// and bounded, so it suits a metric label.
func (p *Problem) Reason() string {
	return p.Type[strings.LastIndexByte(p.Type, '/')+1:]
}

// JSON encodes the problem.
func (p *Problem) JSON() []byte {
	b, err := json.Marshal(p)
	if err != nil {
		// A struct of strings and an int always marshals.
		panic(err)
	}
	return b
}

// ProblemFor maps an error returned by this package to its problem.
// Errors outside the table (a cancelled context, an unwrapped store error)
// become store-failure, because the write did not happen and may be
// retried.
func ProblemFor(err error) *Problem {
	for _, row := range problemTable {
		if errors.Is(err, row.err) {
			p := &Problem{Type: row.typ, Title: row.title, Status: row.status, Detail: err.Error()}
			var se *StaleError
			if errors.As(err, &se) {
				p.MaxSeenEpoch = FormatEpoch(se.MaxSeen)
			}
			return p
		}
	}
	detail := err.Error()
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		detail = "request ended before the write: " + detail
	}
	return &Problem{Type: ProblemStoreFailure, Title: "Fencing store failure", Status: http.StatusServiceUnavailable, Detail: detail}
}
