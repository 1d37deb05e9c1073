package httpapi

import "errors"

// Sentinel errors of the HTTP layer itself: request problems found before
// the Store is called, and configuration errors. problems.go maps each one
// (and every Store sentinel) to a status and a problem code.
var (
	// ErrConfig reports an invalid Config; the message names the field.
	ErrConfig = errors.New("httpapi: invalid config")
	// ErrBadRequest reports a malformed request: bad JSON, invalid UTF-8,
	// trailing data, a missing, empty or oversized id, a bad query parameter.
	ErrBadRequest = errors.New("bad request")
	// ErrUnknownField reports a JSON body with a field the route does not
	// define (strict decoding catches client typos and version skew).
	ErrUnknownField = errors.New("unknown field")
	// ErrBodyTooLarge reports a request body over Config.MaxBodyBytes.
	ErrBodyTooLarge = errors.New("request body too large")
	// ErrNoRoute reports a path no route matches.
	ErrNoRoute = errors.New("no such route")
	// ErrMethod reports a method the matched route does not allow.
	ErrMethod = errors.New("method not allowed")
	// ErrForwardLoop reports a forwarded request that reached a node which is
	// not the leader either; answering 503 instead of forwarding again keeps
	// two nodes with stale leader views from bouncing a request forever.
	ErrForwardLoop = errors.New("forwarded request reached a non-leader")
	// ErrForwardFailed reports that the leader could not be reached; the
	// request was not sent, so it is safe to retry.
	ErrForwardFailed = errors.New("leader unreachable")
	// ErrUnauthenticated reports a caller without a verified client
	// certificate naming a fencepost identity (API served with TLS).
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrForbidden reports a caller whose role lacks the route's
	// permission; the problem's detail names the permission.
	ErrForbidden = errors.New("forbidden")
	// ErrWorkerNotBound reports a sidecar opening a session under a worker
	// id its certificate does not name (pki.WorkerIDs).
	ErrWorkerNotBound = errors.New("worker id not bound to the certificate")
	// ErrForwardBroken reports a forward that failed after the request may
	// have reached the leader; retry with the same request id.
	ErrForwardBroken = errors.New("forward to leader failed mid-request, outcome unknown")
)
