package fence

import (
	"errors"
	"fmt"
)

// Sentinel errors of package fence. Every rejection and store error the
// package returns wraps exactly one of them (FetchKeys may also return
// plain network errors); test with errors.Is. Each rejection maps to one
// problem type (see ProblemFor and SPEC.md section 4).
var (
	// ErrMissingToken: the write carries no X-Fencing-Token.
	ErrMissingToken = errors.New("fence: missing fencing token")
	// ErrMalformedToken: the token is not a canonical decimal epoch, or the
	// header is repeated.
	ErrMalformedToken = errors.New("fence: malformed fencing token")
	// ErrMissingTask: the write carries no X-Fencing-Task.
	ErrMissingTask = errors.New("fence: missing task id")
	// ErrMalformedTask: the task id breaks the syntax, or is repeated.
	ErrMalformedTask = errors.New("fence: malformed task id")
	// ErrMalformedHolder: the holder id breaks the syntax, or is repeated.
	ErrMalformedHolder = errors.New("fence: malformed holder id")
	// ErrMissingSignature: signatures are required and none was sent.
	ErrMissingSignature = errors.New("fence: missing token signature")
	// ErrBadSignature: the signature header is malformed or does not verify
	// (a forged or altered token).
	ErrBadSignature = errors.New("fence: bad token signature")
	// ErrUnknownKey: the signature names a key id the validator does not
	// know (not a cluster key, or keys not refreshed after a rotation).
	ErrUnknownKey = errors.New("fence: unknown signing key")
	// ErrStale: the epoch is lower than the highest epoch already seen for
	// the task; the sender has been replaced. Returned as *StaleError.
	ErrStale = errors.New("fence: stale fencing token")
	// ErrInvalidIdempotencyKey: the Idempotency-Key breaks the syntax or is
	// repeated.
	ErrInvalidIdempotencyKey = errors.New("fence: invalid idempotency key")
	// ErrInProgress: a write with the same Idempotency-Key is still running.
	ErrInProgress = errors.New("fence: idempotent request in progress")
	// ErrPayloadMismatch: the Idempotency-Key was used before with a
	// different payload fingerprint.
	ErrPayloadMismatch = errors.New("fence: idempotency key reused with a different payload")
	// ErrScope: the service's scope hook refused the task for this request.
	ErrScope = errors.New("fence: task not allowed in this scope")
	// ErrBodyTooLarge: the request body exceeds the limit the middleware
	// reads to fingerprint the payload.
	ErrBodyTooLarge = errors.New("fence: request body too large")
	// ErrStoreFull: a bounded store cannot take a new task or record
	// without forgetting state it must keep.
	ErrStoreFull = errors.New("fence: store full")
	// ErrHolderFull: one holder used up its share of a bounded store
	// (MemStoreConfig.MaxTasksPerHolder). It wraps ErrStoreFull, so it is
	// answered as store-full (503), with a detail naming the holder and
	// its limit.
	ErrHolderFull = fmt.Errorf("%w: the holder's share is used up", ErrStoreFull)
	// ErrStore: the store failed (I/O, database); the write was not made.
	ErrStore = errors.New("fence: store failure")
	// ErrWriteFailed: the handler failed (error or 5xx); the write was not
	// recorded and the idempotency claim was released.
	ErrWriteFailed = errors.New("fence: write failed")
	// ErrInvalidConfig: a Config failed validation.
	ErrInvalidConfig = errors.New("fence: invalid configuration")
)

// StaleError is the error for a stale epoch; it wraps ErrStale and tells
// the highest epoch the store has seen for the task.
type StaleError struct {
	// Epoch is the rejected epoch.
	Epoch uint64
	// MaxSeen is the highest epoch seen for the task.
	MaxSeen uint64
}

// Error implements error.
func (e *StaleError) Error() string {
	return fmt.Sprintf("%v: epoch %d is lower than max seen %d", ErrStale, e.Epoch, e.MaxSeen)
}

// Unwrap makes errors.Is(err, ErrStale) true.
func (e *StaleError) Unwrap() error { return ErrStale }
