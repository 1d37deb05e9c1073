package httpapi

import (
	"net/http"
	"net/http/pprof"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

// pprofPrefix is where Config.Pprof serves Go's profiler, the path
// `go tool pprof http://host:7400/debug/pprof/profile` expects.
var pprofPrefix = []byte("/debug/pprof/")

// pprofHandler serves net/http/pprof on its own mux, so enabling it never
// touches http.DefaultServeMux.
func pprofHandler() fasthttp.RequestHandler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return fasthttpadaptor.NewFastHTTPHandler(mux)
}
