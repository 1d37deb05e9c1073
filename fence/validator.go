package fence

import (
	"context"
	"errors"
	"fmt"
	"net/http"
)

// DefaultMaxBodyBytes bounds the body a middleware reads to fingerprint a
// write that carries an Idempotency-Key.
const DefaultMaxBodyBytes = 8 << 20

// Config configures a Validator. Only Store is required.
type Config struct {
	// Store keeps max_seen and idempotency records.
	Store Store
	// Keys verifies X-Fencing-Signature. When nil, signatures are not
	// checked (the header is ignored); when set, every write must carry a
	// valid signature unless AllowUnsigned is true.
	Keys KeySet
	// AllowUnsigned accepts writes without a signature even though Keys is
	// set (a signature that is present is still verified). Meant for
	// migrations; it re-opens the forged-high-token hole.
	AllowUnsigned bool
	// IsWrite decides which requests are fenced; the default fences every
	// method except GET, HEAD, OPTIONS and TRACE. Requests it rejects pass
	// through untouched.
	IsWrite func(method, path string) bool
	// MaxBodyBytes bounds the body read for the payload fingerprint
	// (default DefaultMaxBodyBytes); larger writes get 413.
	MaxBodyBytes int64
	// Observer, when set, sees every decision on a write (for metrics). It
	// runs on the request goroutine and must be fast.
	Observer func(Decision)
	// Annotate, when set, sees every decision on a write with the
	// request's context, e.g. to record the verdict on the request's span
	// (fence/fenceotel.Annotate); fence itself depends on no tracing
	// library. It runs on the request goroutine and must be fast.
	Annotate func(context.Context, Decision)
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.Store == nil {
		return fmt.Errorf("%w: Config.Store is required", ErrInvalidConfig)
	}
	if c.MaxBodyBytes < 0 {
		return fmt.Errorf("%w: Config.MaxBodyBytes must not be negative", ErrInvalidConfig)
	}
	return nil
}

// Decision is what the Validator did with one write, for observers.
type Decision struct {
	// Outcome is Executed or Replayed; 0 when the write was rejected.
	Outcome Outcome
	// Status is the HTTP status sent (the problem's on a rejection); an Executed
	// write with a 5xx did not take effect (nothing was recorded).
	Status int
	// Problem is the rejection; nil when Outcome is set.
	Problem *Problem
	// Write holds what was parsed before the decision (partial on early
	// rejections). Task ids are for logs, never for metric labels.
	Write Write
	// Err is the underlying error of a rejection.
	Err error
}

// Input is one request as a middleware presents it to the Validator.
// Header fields hold every value of the header, so a repeated header can
// be rejected.
type Input struct {
	// Token, Task, Holder, Signature and IdempotencyKey hold every value
	// of X-Fencing-Token, X-Fencing-Task, X-Fencing-Holder,
	// X-Fencing-Signature and Idempotency-Key, in order of appearance.
	Token, Task, Holder, Signature, IdempotencyKey []string
	// Method and RequestURI (path and query) enter the payload fingerprint.
	Method, RequestURI string
	// Scope maps the task id to the service's tenant and may refuse it
	// (wrap or return ErrScope for a 403). Nil means tenant "".
	Scope func(task string) (tenant string, err error)
	// Body returns the request body; called only when an Idempotency-Key
	// is present. It returns an error wrapping ErrBodyTooLarge past the
	// limit.
	Body func() ([]byte, error)
}

// Result is the Validator's answer to a middleware.
type Result struct {
	// Outcome is Executed or Replayed, or 0 when rejected.
	Outcome Outcome
	// Response is the handler's (Executed) or the stored (Replayed) one.
	Response *Response
	// Problem is set when the write was rejected or failed.
	Problem *Problem
	// Err is the error behind Problem.
	Err error
}

// Validator applies the decision table of SPEC.md to writes. It is safe
// for concurrent use.
type Validator struct {
	cfg Config
}

// NewValidator checks cfg and returns a Validator.
func NewValidator(cfg Config) (*Validator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.IsWrite == nil {
		cfg.IsWrite = DefaultIsWrite
	}
	return &Validator{cfg: cfg}, nil
}

// DefaultIsWrite treats every method except the safe ones (GET, HEAD,
// OPTIONS, TRACE) as a write: unknown means write.
func DefaultIsWrite(method, _ string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return false
	}
	return true
}

// IsWrite reports whether a request must be fenced.
func (v *Validator) IsWrite(method, path string) bool { return v.cfg.IsWrite(method, path) }

// MaxBodyBytes is the body limit middlewares enforce in Input.Body.
func (v *Validator) MaxBodyBytes() int64 { return v.cfg.MaxBodyBytes }

// Parse performs the stateless checks, in order: token (missing, repeated,
// malformed), task, holder, signature, Idempotency-Key syntax. It returns
// the Write with Key.Tenant unset and no Fingerprint.
func (v *Validator) Parse(in Input) (Write, error) {
	var w Write
	switch len(in.Token) {
	case 0:
		return w, ErrMissingToken
	case 1:
	default:
		return w, fmt.Errorf("%w: header %s repeated", ErrMalformedToken, HeaderToken)
	}
	epoch, err := ParseEpoch(in.Token[0])
	if err != nil {
		return w, err
	}
	w.Epoch = epoch
	switch len(in.Task) {
	case 0:
		return w, ErrMissingTask
	case 1:
	default:
		return w, fmt.Errorf("%w: header %s repeated", ErrMalformedTask, HeaderTask)
	}
	if err := ValidTask(in.Task[0]); err != nil {
		return w, err
	}
	w.Key.Task = in.Task[0]
	switch len(in.Holder) {
	case 0:
	case 1:
		if err := ValidHolder(in.Holder[0]); err != nil {
			return w, err
		}
		w.Holder = in.Holder[0]
	default:
		return w, fmt.Errorf("%w: header %s repeated", ErrMalformedHolder, HeaderHolder)
	}
	if v.cfg.Keys != nil {
		switch len(in.Signature) {
		case 0:
			if !v.cfg.AllowUnsigned {
				return w, ErrMissingSignature
			}
		case 1:
			if err := VerifySignature(v.cfg.Keys, in.Signature[0], w.Key.Task, w.Epoch, w.Holder); err != nil {
				return w, err
			}
		default:
			return w, fmt.Errorf("%w: header %s repeated", ErrBadSignature, HeaderSignature)
		}
	}
	switch len(in.IdempotencyKey) {
	case 0:
	case 1:
		if err := ValidIdempotencyKey(in.IdempotencyKey[0]); err != nil {
			return w, err
		}
		w.IdempotencyKey = in.IdempotencyKey[0]
	default:
		return w, fmt.Errorf("%w: header %s repeated", ErrInvalidIdempotencyKey, HeaderIdempotencyKey)
	}
	return w, nil
}

// Check runs the whole decision table for one write: Parse, the scope
// hook, the payload fingerprint, then the Store (stale, idempotency, fn).
func (v *Validator) Check(ctx context.Context, in Input, fn WriteFunc) Result {
	w, err := v.Parse(in)
	if err == nil && in.Scope != nil {
		w.Key.Tenant, err = in.Scope(w.Key.Task)
		if err != nil && !errors.Is(err, ErrScope) {
			err = fmt.Errorf("%w: %w", ErrScope, err)
		}
	}
	if err == nil && w.IdempotencyKey != "" {
		var body []byte
		if in.Body != nil {
			body, err = in.Body()
		}
		w.Fingerprint = PayloadFingerprint(in.Method, in.RequestURI, body)
	}
	if err != nil {
		return v.reject(ctx, w, err)
	}
	resp, outcome, err := v.cfg.Store.Do(WithWrite(ctx, w), w, fn)
	if err != nil {
		return v.reject(ctx, w, err)
	}
	v.decided(ctx, Decision{Outcome: outcome, Status: resp.Status, Write: w})
	return Result{Outcome: outcome, Response: resp}
}

// reject answers a write with the problem for err.
func (v *Validator) reject(ctx context.Context, w Write, err error) Result {
	p := ProblemFor(err)
	v.decided(ctx, Decision{Problem: p, Status: p.Status, Write: w, Err: err})
	return Result{Problem: p, Err: err}
}

// decided hands a decision to the hooks.
func (v *Validator) decided(ctx context.Context, d Decision) {
	if v.cfg.Observer != nil {
		v.cfg.Observer(d)
	}
	if v.cfg.Annotate != nil {
		v.cfg.Annotate(ctx, d)
	}
}
