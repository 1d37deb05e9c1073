package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/raftstore"
	"github.com/valyala/fasthttp"
)

// CodeUnknownProfile is the problem code of a task profile the cluster does
// not define. The other codes come from api (transport) and lease
// (model errors, via lease.Errors).
const CodeUnknownProfile = api.CodeUnknownProfile

// CodeUnauthenticated and CodeForbidden are the problem codes of a caller
// without a usable certificate and of a missing permission.
const (
	CodeUnauthenticated = "unauthenticated"
	CodeForbidden       = "forbidden"
	// CodeRateLimited: the caller's identity is over its request rate.
	CodeRateLimited = "rate_limited"
	// CodeWorkerNotBound: a session under a worker id the sidecar's
	// certificate does not name.
	CodeWorkerNotBound = "worker_not_bound"
)

// retryAfterSeconds is the Retry-After of every 503: an election with the
// shipped timeouts takes well under a second.
const retryAfterSeconds = 1

// problemMapping is one row of the error table.
type problemMapping struct {
	err    error
	status int
	code   string
}

// problemTable is the one place errors become statuses. Rows are tried in
// order with errors.Is, so the more specific errors come first: transport
// and availability errors, then the model's errors (their codes and
// statuses come from the model's own table, lease.Errors), then the
// store's generic argument errors (which a store may wrap around a model
// error), then context errors.
var problemTable = func() []problemMapping {
	t := []problemMapping{
		{ErrUnknownField, http.StatusBadRequest, api.CodeUnknownField},
		{ErrBadRequest, http.StatusBadRequest, api.CodeBadRequest},
		{ErrBodyTooLarge, http.StatusRequestEntityTooLarge, api.CodeTooLarge},
		{ErrNoRoute, http.StatusNotFound, api.CodeNotFound},
		{ErrMethod, http.StatusMethodNotAllowed, api.CodeMethod},
		{ErrForwardLoop, http.StatusServiceUnavailable, api.CodeUnavailable},
		{ErrForwardFailed, http.StatusServiceUnavailable, api.CodeUnavailable},
		{ErrForwardBroken, http.StatusBadGateway, api.CodeUnknownOutcome},
		{ErrUnauthenticated, http.StatusUnauthorized, CodeUnauthenticated},
		{ErrWorkerNotBound, http.StatusForbidden, CodeWorkerNotBound},
		{ErrForbidden, http.StatusForbidden, CodeForbidden},
		{ErrRateLimited, http.StatusTooManyRequests, CodeRateLimited},
		{ErrBodyBudget, http.StatusServiceUnavailable, api.CodeUnavailable},

		{raftstore.ErrTimeout, http.StatusGatewayTimeout, api.CodeTimeout},
		// ErrNotLeader only reaches this table when forwarding was impossible.
		{raftstore.ErrNotLeader, http.StatusServiceUnavailable, api.CodeUnavailable},
		{raftstore.ErrNoLeader, http.StatusServiceUnavailable, api.CodeUnavailable},
		{raftstore.ErrShutdown, http.StatusServiceUnavailable, api.CodeUnavailable},
		{raftstore.ErrNotReady, http.StatusServiceUnavailable, api.CodeUnavailable},
		// A member that halted (raftstore/format.go) may have committed the
		// caller's entry without applying it: the outcome is unknown, and a
		// retry with the same request id, at another member, is safe.
		{raftstore.ErrHalted, http.StatusGatewayTimeout, api.CodeTimeout},
	}
	for _, e := range lease.Errors() {
		t = append(t, problemMapping{e.Err, e.Status, e.Code})
	}
	return append(t,
		problemMapping{raftstore.ErrTooLarge, http.StatusRequestEntityTooLarge, api.CodeTooLarge},
		problemMapping{raftstore.ErrUnknownProfile, http.StatusBadRequest, CodeUnknownProfile},
		problemMapping{raftstore.ErrInvalidArgument, http.StatusBadRequest, api.CodeBadRequest},
		problemMapping{raftstore.ErrMembership, http.StatusConflict, api.CodeMembership},

		problemMapping{context.DeadlineExceeded, http.StatusGatewayTimeout, api.CodeTimeout},
		problemMapping{context.Canceled, http.StatusServiceUnavailable, api.CodeUnavailable},
	)
}()

// epochCarrier is implemented by store errors that know the task's current
// epoch; the problem then carries it so a stale holder learns how far behind
// it is without another round trip.
type epochCarrier interface {
	CurrentEpoch() uint64
}

// problemFor maps err to its problem document. Unknown errors are 500
// internal; their text is logged, not sent, since it may carry internals.
func problemFor(err error, instance string) api.Problem {
	p := api.Problem{Status: http.StatusInternalServerError, Code: api.CodeInternal, Instance: instance}
	for _, m := range problemTable {
		if errors.Is(err, m.err) {
			p.Status = m.status
			p.Code = m.code
			p.Detail = err.Error()
			break
		}
	}
	if p.Code == api.CodeInternal {
		p.Detail = "internal error; see the server log for this request id"
	}
	p.Type = api.ProblemTypeBase + p.Code
	p.Title = http.StatusText(p.Status)
	var ec epochCarrier
	if errors.As(err, &ec) {
		p.Epoch = ec.CurrentEpoch()
	}
	return p
}

// writeProblem writes p as the response. Every 503 carries Retry-After.
func writeProblem(rc *fasthttp.RequestCtx, p api.Problem) {
	body, err := json.Marshal(p)
	if err != nil { // cannot happen: Problem has only plain fields
		body = []byte(`{"code":"internal"}`)
	}
	rc.Response.Header.SetContentType(api.ProblemContentType)
	if p.Status == http.StatusServiceUnavailable || p.Code == CodeRateLimited {
		rc.Response.Header.Set("Retry-After", strconv.Itoa(retryAfterSeconds))
	}
	rc.SetStatusCode(p.Status)
	rc.SetBody(body)
}
