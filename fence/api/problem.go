package api

// ProblemContentType is the media type of every error body (RFC 9457).
const ProblemContentType = "application/problem+json"

// ProblemTypeBase prefixes every problem type; the tail is a stable code.
const ProblemTypeBase = "https://fencepost.dev/problems/"

// Problem is an RFC 9457 problem document. Code repeats the tail of Type
// so scripts can branch without parsing URIs.
type Problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Code     string `json:"code"`
	Instance string `json:"instance,omitempty"`
	// Epoch, on stale-epoch and lease problems, is the task's current epoch.
	Epoch uint64 `json:"epoch,omitempty"`
}

// Problem codes of the cluster API that are not model errors (model errors
// use lease.ErrorCode).
const (
	CodeBadRequest     = "bad_request"
	CodeUnknownField   = "unknown_field"
	CodeTooLarge       = "too_large"
	CodeNotFound       = "not_found"
	CodeMethod         = "method_not_allowed"
	CodeUnavailable    = "unavailable" // no leader yet, or the leader cannot be reached; retry
	CodeTimeout        = "timeout"     // outcome unknown; retry with the same request id
	CodeInternal       = "internal"
	CodeUnknownOutcome = "unknown_outcome"
	CodeUnknownProfile = "unknown_profile"    // a task profile the cluster does not define
	CodeMembership     = "membership_refused" // a join without proof, or a removal that would lose quorum; nothing changed
)
