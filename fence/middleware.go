package fence

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// MiddlewareConfig configures the net/http Middleware.
type MiddlewareConfig struct {
	// Config is the validator configuration (Store is required).
	Config
	// Scope maps a request and its task id to the tenant that scopes
	// max_seen and idempotency records, and may refuse the task (return an
	// error; it becomes a 403 scope-rejected). Nil means tenant "".
	Scope func(r *http.Request, task string) (tenant string, err error)
}

// Middleware fences the writes of a net/http handler. The handler's
// response is buffered so it can be committed with the fencing state (and
// recorded for replay) before anything reaches the client; streaming
// responses are therefore not supported on fenced routes.
type Middleware struct {
	v     *Validator
	scope func(r *http.Request, task string) (string, error)
}

// NewMiddleware validates cfg and returns the middleware.
func NewMiddleware(cfg MiddlewareConfig) (*Middleware, error) {
	v, err := NewValidator(cfg.Config)
	if err != nil {
		return nil, err
	}
	return &Middleware{v: v, scope: cfg.Scope}, nil
}

// Wrap returns next behind the fence. Reads (per IsWrite) pass straight
// through; writes reach next only when they pass the checks, with the
// accepted Write (and a store's transaction, if any) in r.Context().
func (m *Middleware) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !m.v.IsWrite(r.Method, r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		in := Input{
			Token:          r.Header.Values(HeaderToken),
			Task:           r.Header.Values(HeaderTask),
			Holder:         r.Header.Values(HeaderHolder),
			Signature:      r.Header.Values(HeaderSignature),
			IdempotencyKey: r.Header.Values(HeaderIdempotencyKey),
			Method:         r.Method,
			RequestURI:     requestURI(r),
			Body:           func() ([]byte, error) { return readBody(r, m.v.MaxBodyBytes()) },
		}
		if m.scope != nil {
			in.Scope = func(task string) (string, error) { return m.scope(r, task) }
		}
		rec := &recorder{header: make(http.Header)}
		res := m.v.Check(r.Context(), in, func(ctx context.Context) (*Response, error) {
			next.ServeHTTP(rec, r.WithContext(ctx))
			return rec.response(), nil
		})
		switch {
		case res.Problem != nil:
			WriteProblemHTTP(w, res.Problem)
		case res.Outcome == Replayed:
			writeResponse(w, res.Response.Header, res.Response, true)
		default:
			// The caller that ran the write gets every header, cookies
			// included; only the recorded copy is filtered.
			writeResponse(w, rec.header, res.Response, false)
		}
	})
}

// requestURI is the request-target as received, which the payload
// fingerprint covers (SPEC.md section 5).
func requestURI(r *http.Request) string {
	if r.RequestURI != "" {
		return r.RequestURI
	}
	return r.URL.RequestURI()
}

// readBody reads the whole body within limit and puts a fresh reader back
// for the handler.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading body: %v", ErrBodyTooLarge, err)
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrBodyTooLarge, limit)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, nil
}

// WriteProblemHTTP sends p as application/problem+json.
func WriteProblemHTTP(w http.ResponseWriter, p *Problem) {
	body := p.JSON()
	w.Header().Set("Content-Type", ProblemContentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
}

func writeResponse(w http.ResponseWriter, header http.Header, resp *Response, replayed bool) {
	h := w.Header()
	for k, v := range header {
		h[k] = append([]string(nil), v...)
	}
	if replayed {
		h.Set(HeaderReplayed, "true")
	}
	h.Set("Content-Length", strconv.Itoa(len(resp.Body)))
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

// unreplayable lists response headers that are not recorded: hop-by-hop
// headers, values recomputed per response, and cookies, which must not be
// handed to whoever repeats the key.
var unreplayable = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Connection": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Date": true, "Content-Length": true, "Set-Cookie": true,
}

// ReplayableHeader copies the headers of a handler's response that are
// recorded for replay.
func ReplayableHeader(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, v := range h {
		if !unreplayable[http.CanonicalHeaderKey(k)] {
			out[k] = append([]string(nil), v...)
		}
	}
	return out
}

// recorder buffers a handler's response.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

// Header implements http.ResponseWriter.
func (r *recorder) Header() http.Header { return r.header }

// WriteHeader implements http.ResponseWriter; the first status wins.
func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

// Write implements http.ResponseWriter.
func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(p)
}

func (r *recorder) response() *Response {
	status := r.status
	if status == 0 {
		status = http.StatusOK
	}
	if r.header.Get("Content-Type") == "" && r.body.Len() > 0 {
		r.header.Set("Content-Type", http.DetectContentType(r.body.Bytes()))
	}
	return &Response{Status: status, Header: ReplayableHeader(r.header), Body: r.body.Bytes()}
}
