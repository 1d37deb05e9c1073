package proxy

import (
	"errors"

	"github.com/fencepost/fencepost/proxy/request"
)

// Sentinel errors. Callers match them with errors.Is; the returned errors
// wrap them with detail. The keeper's (ErrNoSession, ErrNoLease,
// ErrAmbiguousTask) stand in names.go.
var (
	// ErrInvalidConfig wraps every Config.Validate failure; the message
	// names the field and the rule. (The request path, which loads the
	// CA files, returns it too.)
	ErrInvalidConfig = request.ErrInvalidConfig
	// ErrStarted is returned by Start on a sidecar already started.
	ErrStarted = errors.New("sidecar already started")
	// ErrNotStarted is returned by Shutdown on a sidecar never started.
	ErrNotStarted = errors.New("sidecar not started")
	// ErrClosed is returned by Start after Shutdown.
	ErrClosed = errors.New("sidecar closed")
)
