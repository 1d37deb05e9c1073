package httpapi

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/valyala/fasthttp"
)

// requestID returns the client's request id, or a fresh one when absent
// (so forwarded requests and logs always carry one).
func requestID(rc *fasthttp.RequestCtx) (string, error) {
	if v := rc.Request.Header.Peek(api.HeaderRequestID); len(v) > 0 {
		id := string(v)
		if err := checkID(api.HeaderRequestID, id, false); err != nil {
			return newRequestID(), err
		}
		return id, nil
	}
	return newRequestID(), nil
}

// newRequestID returns 128 random bits in hex.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

func (s *Server) health(rc *fasthttp.RequestCtx) {
	rc.SetContentType("text/plain; charset=utf-8")
	rc.SetStatusCode(http.StatusOK)
	rc.SetBodyString("ok\n")
}

func (s *Server) ready(rc *fasthttp.RequestCtx) {
	if err := s.store.Ready(); err != nil {
		p := problemFor(err, api.PathReady)
		// Whatever the reason, a node that is not ready is unavailable to
		// load balancers and orchestrators, which only look at the status.
		p.Status, p.Code = http.StatusServiceUnavailable, api.CodeUnavailable
		p.Type, p.Title = api.ProblemTypeBase+p.Code, http.StatusText(p.Status)
		p.Detail = "not ready: " + err.Error()
		writeProblem(rc, p)
		return
	}
	rc.SetContentType("text/plain; charset=utf-8")
	rc.SetStatusCode(http.StatusOK)
	rc.SetBodyString("ok\n")
}
