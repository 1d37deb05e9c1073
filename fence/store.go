package fence

import (
	"context"
	"crypto/sha256"
	"net/http"
)

// TaskKey scopes max_seen and idempotency records. The tenant comes from
// the service (a Scope hook), never from the token, so the right epoch for
// another tenant's task of the same name does not pass.
type TaskKey struct {
	// Tenant is the service-defined scope; "" for single-tenant services.
	Tenant string
	// Task is the task id from X-Fencing-Task.
	Task string
}

// Fingerprint identifies a payload for idempotency: SHA-256 over
// "fencepost-payload-v1\n" + method + "\n" + request URI + "\n" + body.
type Fingerprint [sha256.Size]byte

// PayloadFingerprint computes the Fingerprint of one request.
func PayloadFingerprint(method, requestURI string, body []byte) Fingerprint {
	h := sha256.New()
	h.Write([]byte("fencepost-payload-v1\n"))
	h.Write([]byte(method))
	h.Write([]byte{'\n'})
	h.Write([]byte(requestURI))
	h.Write([]byte{'\n'})
	h.Write(body)
	var fp Fingerprint
	h.Sum(fp[:0])
	return fp
}

// Write is one fenced write as the validator hands it to a Store.
type Write struct {
	// Key is the (tenant, task) the epoch is checked against.
	Key TaskKey
	// Epoch is the parsed X-Fencing-Token.
	Epoch uint64
	// Holder is X-Fencing-Holder ("" when absent).
	Holder string
	// IdempotencyKey is Idempotency-Key ("" when absent: no
	// de-duplication, the write always runs if the epoch is current).
	IdempotencyKey string
	// Fingerprint is the payload fingerprint; meaningful only with an
	// IdempotencyKey.
	Fingerprint Fingerprint
}

// Response is a handler's result as recorded for replay.
type Response struct {
	// Status is the HTTP status code.
	Status int
	// Header holds the response headers worth replaying (Content-Type and
	// the like; never hop-by-hop or Date).
	Header http.Header
	// Body is the complete response body.
	Body []byte
}

// Recordable reports whether a response finishes a write: anything below
// 500. A 5xx means the write did not happen, so the store rolls it back and
// releases the idempotency claim for a retry.
func (r *Response) Recordable() bool { return r != nil && r.Status < 500 }

// Outcome says what a Store did with a write.
type Outcome int

const (
	// Executed: the epoch was current, the handler ran and its result was
	// committed with max_seen.
	Executed Outcome = iota + 1
	// Replayed: the Idempotency-Key was already done with the same payload;
	// the stored response is returned and the handler did not run.
	Replayed
)

// String names the outcome.
func (o Outcome) String() string {
	switch o {
	case Executed:
		return "executed"
	case Replayed:
		return "replayed"
	}
	return "unknown"
}

// WriteFunc performs the caller's write. ctx is the one given to Store.Do
// (the Validator puts the accepted Write in it, see WriteFromContext) plus,
// for transactional stores, the transaction the write must use. A returned error or a non-recordable response (5xx)
// aborts: nothing is recorded and the store rolls back what it can.
type WriteFunc func(ctx context.Context) (*Response, error)

// Store keeps max_seen per task and the idempotency records, and runs a
// write atomically with the fencing check. Implementations must make these
// hold for every TaskKey:
//
//   - Decision order: epoch < max_seen → *StaleError (ErrStale), before any
//     idempotency lookup; otherwise max_seen is raised to the epoch.
//   - Idempotency (only when w.IdempotencyKey != ""): a record done with the
//     same Fingerprint → Replayed with the stored response (even for a
//     higher epoch than the one that produced it), a different Fingerprint
//     → ErrPayloadMismatch, a record still running → ErrInProgress (a store
//     that serialises same-task writes instead makes the duplicate wait and
//     then replay), no record → fn runs.
//   - fn runs while no other write for the same TaskKey runs, and only
//     after the epoch was re-confirmed as current, so accepted epochs per
//     task never decrease in the order the writes take effect (I3).
//   - A failed, panicking or 5xx fn leaves no idempotency record behind.
type Store interface {
	// Do applies the checks and, when they pass, runs fn. The returned
	// response is fn's (Executed) or the stored one (Replayed).
	Do(ctx context.Context, w Write, fn WriteFunc) (*Response, Outcome, error)
}

type writeCtxKey struct{}

// WithWrite returns a context carrying the write; the Validator calls it
// before Store.Do so the handler can read the write back.
func WithWrite(ctx context.Context, w Write) context.Context {
	return context.WithValue(ctx, writeCtxKey{}, w)
}

// WriteFromContext returns the accepted write a handler runs for, so the
// handler can log the epoch, holder and key with its own data.
func WriteFromContext(ctx context.Context) (Write, bool) {
	w, ok := ctx.Value(writeCtxKey{}).(Write)
	return w, ok
}
