package proxy

import "errors"

// Sentinel errors. Callers match them with errors.Is; the returned errors
// wrap them with detail.
var (
	// ErrInvalidConfig wraps every Config.Validate failure; the message
	// names the field and the rule.
	ErrInvalidConfig = errors.New("invalid proxy config")
	// ErrStarted is returned by Start on a sidecar already started.
	ErrStarted = errors.New("sidecar already started")
	// ErrNotStarted is returned by Shutdown on a sidecar never started.
	ErrNotStarted = errors.New("sidecar not started")
	// ErrClosed is returned by Start after Shutdown.
	ErrClosed = errors.New("sidecar closed")
	// ErrNoSession means the sidecar has no open session with the cluster
	// yet (or lost it and is reopening), so lease calls cannot be made.
	ErrNoSession = errors.New("no cluster session")
	// ErrNoLease means the sidecar holds no current lease for the task a
	// call names.
	ErrNoLease = errors.New("no current lease")
	// ErrAmbiguousTask means several leases are held and the call did not
	// say which task it is for.
	ErrAmbiguousTask = errors.New("several leases held; name the task")
)
