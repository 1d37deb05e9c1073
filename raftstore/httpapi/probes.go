package httpapi

import (
	"net/http"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/valyala/fasthttp"
)

// health answers /healthz: the process serves.
func (s *Server) health(rc *fasthttp.RequestCtx) {
	rc.SetContentType("text/plain; charset=utf-8")
	rc.SetStatusCode(http.StatusOK)
	rc.SetBodyString("ok\n")
}

// ready answers /readyz: the store can serve (a leader is known).
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
