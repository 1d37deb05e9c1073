package proxy

import (
	"testing"

	"github.com/valyala/fasthttp"
)

// newTestCtx builds a RequestCtx for an absolute-form request without a
// connection, for unit tests of the decision path.
func newTestCtx(method, uri, body string) *fasthttp.RequestCtx {
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.DisableNormalizing()
	ctx.Request.Header.SetMethod(method)
	ctx.Request.SetRequestURI(uri)
	ctx.Request.SetBodyString(body)
	return &ctx
}

func acquireReq(t testing.TB) *fasthttp.Request {
	r := fasthttp.AcquireRequest()
	t.Cleanup(func() { fasthttp.ReleaseRequest(r) })
	return r
}
