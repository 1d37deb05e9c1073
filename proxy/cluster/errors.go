package cluster

import (
	"errors"
	"fmt"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

// Sentinel errors of the client. Problems the cluster answers are *Error
// values, which also match the lease sentinels (errors.Is(err,
// lease.ErrStaleEpoch) works across the wire) and these.
var (
	// ErrConfig reports an invalid Config; the message names the field.
	ErrConfig = errors.New("cluster: invalid config")
	// ErrUnavailable reports that no endpoint could serve the call: none was
	// reachable, or the cluster has no leader (problem code "unavailable").
	// The call was not applied.
	ErrUnavailable = errors.New("cluster: unavailable")
	// ErrTimeout reports a call whose outcome is unknown: an attempt timed
	// out, the connection was lost mid-request, or the cluster answered
	// "timeout" or "unknown_outcome". Repeating the call with the same
	// request id (WithRequestID) is safe: the cluster de-duplicates it.
	ErrTimeout = errors.New("cluster: timeout, outcome unknown")
	// ErrBadRequest reports a request the cluster refused as malformed
	// (problem codes bad_request, unknown_field, unknown_profile).
	ErrBadRequest = errors.New("cluster: bad request")
	// ErrTooLarge reports a body or field over the cluster's bounds.
	ErrTooLarge = errors.New("cluster: too large")
	// ErrBadResponse reports an answer that is not what the API promises
	// (an undecodable body); it points at a version skew or a proxy in the way.
	ErrBadResponse = errors.New("cluster: bad response")
)

// codeSentinels maps a problem code to the sentinel it matches.
var codeSentinels = func() map[string]error {
	m := map[string]error{
		api.CodeUnavailable:    ErrUnavailable,
		api.CodeTimeout:        ErrTimeout,
		api.CodeUnknownOutcome: ErrTimeout,
		api.CodeBadRequest:     ErrBadRequest,
		api.CodeUnknownField:   ErrBadRequest,
		api.CodeUnknownProfile: ErrBadRequest,
		api.CodeTooLarge:       ErrTooLarge,
	}
	// The model's errors come from its own table, so a code the cluster
	// answers always turns back into the sentinel it stands for.
	for _, e := range lease.Errors() {
		m[e.Code] = e.Err
	}
	return m
}()

// Error is a problem the cluster answered.
type Error struct {
	// Status is the HTTP status.
	Status int
	// Problem is the decoded problem document (synthesized from the status
	// when the body was not one).
	Problem api.Problem
	// Endpoint is the member that answered.
	Endpoint string
}

// Error implements error.
func (e *Error) Error() string {
	msg := fmt.Sprintf("cluster: %d %s", e.Status, e.Problem.Code)
	if e.Problem.Detail != "" {
		msg += ": " + e.Problem.Detail
	}
	return msg
}

// Is matches the sentinel of the problem's code: a lease sentinel for model
// errors, or ErrUnavailable, ErrTimeout, ErrBadRequest, ErrTooLarge.
func (e *Error) Is(target error) bool {
	s, ok := codeSentinels[e.Problem.Code]
	return ok && s == target
}

// retryable reports whether the problem says the call was not applied
// (unavailable) or may be repeated under its request id (timeout,
// unknown_outcome). Anything else is the cluster's final answer.
func (e *Error) retryable() bool {
	switch e.Problem.Code {
	case api.CodeUnavailable, api.CodeTimeout, api.CodeUnknownOutcome:
		return true
	}
	return false
}
