// Package fasthttpfence is the fasthttp middleware of package fence: the
// same decision table as fence.Middleware, for services served by
// github.com/valyala/fasthttp. It lives in its own package so net/http
// services do not pull fasthttp in.
//
// The handler's response is kept in the RequestCtx until the store
// commits; on a commit failure it is replaced by a problem document, so a
// fenced handler must not stream its body (SetBodyStream) or hijack the
// connection.
package fasthttpfence

import (
	"context"
	"fmt"
	"net/http"

	"github.com/fencepost/fencepost/fence"
	"github.com/valyala/fasthttp"
)

// Config configures the middleware.
type Config struct {
	// Config is the validator configuration (Store is required).
	fence.Config
	// Scope maps a request and its task id to the tenant that scopes
	// max_seen and idempotency records, and may refuse the task (return an
	// error; it becomes a 403 scope-rejected). Nil means tenant "".
	Scope func(rc *fasthttp.RequestCtx, task string) (tenant string, err error)
}

// Middleware fences the writes of a fasthttp handler.
type Middleware struct {
	v     *fence.Validator
	scope func(rc *fasthttp.RequestCtx, task string) (string, error)
}

// New validates cfg and returns the middleware.
func New(cfg Config) (*Middleware, error) {
	v, err := fence.NewValidator(cfg.Config)
	if err != nil {
		return nil, err
	}
	return &Middleware{v: v, scope: cfg.Scope}, nil
}

// ctxKey is the user value under which a fenced handler finds its context.
type ctxKey struct{}

// parentKey is the user value holding the request's own context (SetContext).
type parentKey struct{}

// SetContext gives the request a context the fence runs under instead of a
// background one, e.g. one carrying the request's span so the validator's Annotate
// hook finds it. Call it before the wrapped handler runs.
func SetContext(rc *fasthttp.RequestCtx, ctx context.Context) { rc.SetUserValue(parentKey{}, ctx) }

// Context returns the context a fenced handler must use for the store's
// work: it carries the accepted fence.Write and, with sqlstore, the
// transaction (sqlstore.TxFromContext). Outside a fenced write it returns
// rc itself, which is a context.Context.
func Context(rc *fasthttp.RequestCtx) context.Context {
	if ctx, ok := rc.UserValue(ctxKey{}).(context.Context); ok {
		return ctx
	}
	return rc
}

// WriteFromRequest returns the accepted write the handler runs for.
func WriteFromRequest(rc *fasthttp.RequestCtx) (fence.Write, bool) {
	return fence.WriteFromContext(Context(rc))
}

// Wrap returns next behind the fence. Reads (per IsWrite) pass straight
// through.
func (m *Middleware) Wrap(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(rc *fasthttp.RequestCtx) {
		method, path := string(rc.Method()), string(rc.Path())
		if !m.v.IsWrite(method, path) {
			next(rc)
			return
		}
		h := &rc.Request.Header
		in := fence.Input{
			Token:          values(h, fence.HeaderToken),
			Task:           values(h, fence.HeaderTask),
			Holder:         values(h, fence.HeaderHolder),
			Signature:      values(h, fence.HeaderSignature),
			IdempotencyKey: values(h, fence.HeaderIdempotencyKey),
			Method:         method,
			RequestURI:     string(rc.RequestURI()),
			Body: func() ([]byte, error) {
				body := rc.PostBody()
				if int64(len(body)) > m.v.MaxBodyBytes() {
					return nil, fmt.Errorf("%w: more than %d bytes", fence.ErrBodyTooLarge, m.v.MaxBodyBytes())
				}
				return body, nil
			},
		}
		if m.scope != nil {
			in.Scope = func(task string) (string, error) { return m.scope(rc, task) }
		}
		// Not rc itself: a store may hand the context to goroutines that
		// outlive the handler (database/sql watches it until the rows are
		// closed), and rc's values are reset for the next request the
		// moment the handler returns (fasthttp: never keep a RequestCtx).
		parent := context.Background()
		if ctx, ok := rc.UserValue(parentKey{}).(context.Context); ok {
			parent = ctx
		}
		res := m.v.Check(parent, in, func(ctx context.Context) (*fence.Response, error) {
			rc.SetUserValue(ctxKey{}, ctx)
			defer rc.RemoveUserValue(ctxKey{})
			next(rc)
			return captured(&rc.Response), nil
		})
		switch {
		case res.Problem != nil:
			// Also replaces a handler response whose commit failed.
			rc.Response.Reset()
			WriteProblem(rc, res.Problem)
		case res.Outcome == fence.Replayed:
			replay(rc, res.Response)
		}
		// Executed: the handler's own response is already in rc.
	}
}

// values copies every value of a request header; the slices fasthttp
// returns are only valid until the next Peek.
func values(h *fasthttp.RequestHeader, name string) []string {
	raw := h.PeekAll(name)
	if len(raw) == 0 {
		return nil
	}
	out := make([]string, len(raw))
	for i, v := range raw {
		out[i] = string(v)
	}
	return out
}

// captured copies the handler's response for recording: fasthttp reuses
// its buffers once the handler returns.
func captured(r *fasthttp.Response) *fence.Response {
	h := make(http.Header)
	for k, v := range r.Header.All() {
		h.Add(string(k), string(v))
	}
	return &fence.Response{
		Status: r.StatusCode(),
		Header: fence.ReplayableHeader(h),
		Body:   append([]byte(nil), r.Body()...),
	}
}

func replay(rc *fasthttp.RequestCtx, resp *fence.Response) {
	rc.Response.Reset()
	for k, vs := range resp.Header {
		for _, v := range vs {
			rc.Response.Header.Add(k, v)
		}
	}
	rc.Response.Header.Set(fence.HeaderReplayed, "true")
	rc.SetStatusCode(resp.Status)
	rc.SetBody(resp.Body)
}

// WriteProblem sends p as application/problem+json.
func WriteProblem(rc *fasthttp.RequestCtx, p *fence.Problem) {
	rc.SetStatusCode(p.Status)
	rc.SetContentType(fence.ProblemContentType)
	rc.SetBody(p.JSON())
}
