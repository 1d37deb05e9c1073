package request

import "github.com/valyala/fasthttp"

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

// newExchange starts an exchange of ctx through p, for unit tests of its
// steps; the caller defers finish, as Serve does.
func newExchange(p *Pipeline, ctx *fasthttp.RequestCtx) *exchange {
	return &exchange{p: p, ctx: ctx}
}
