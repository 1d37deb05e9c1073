package fence

import (
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type httpFixture struct {
	srv   *httptest.Server
	runs  atomic.Int64
	store *MemStore
}

// newHTTPFixture serves a fenced handler on 127.0.0.1:0. The handler
// echoes the body and the accepted epoch and sets a cookie; "/panic"
// panics; "/fail" answers 500.
func newHTTPFixture(t *testing.T, cfg MiddlewareConfig) *httpFixture {
	t.Helper()
	fx := &httpFixture{}
	var err error
	fx.store, err = NewMemStore(MemStoreConfig{})
	require.NoError(t, err)
	cfg.Store = fx.store
	mw, err := NewMiddleware(cfg)
	require.NoError(t, err)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/panic":
			panic("handler crashed")
		case "/fail":
			http.Error(w, "backend down", http.StatusInternalServerError)
			return
		}
		n := fx.runs.Add(1)
		body, _ := io.ReadAll(r.Body)
		fw, fenced := WriteFromContext(r.Context())
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "secret"})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"run": n, "body": string(body), "fenced": fenced, "epoch": fw.Epoch, "tenant": fw.Key.Tenant})
	})
	fx.srv = httptest.NewUnstartedServer(mw.Wrap(h))
	fx.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the deliberate panic is logged by net/http
	fx.srv.Start()
	t.Cleanup(fx.srv.Close)
	return fx
}

func (fx *httpFixture) do(t *testing.T, method, path, body string, headers map[string][]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, fx.srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	for k, vs := range headers {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := fx.srv.Client().Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

func fenceHeaders(epoch, task, key string) map[string][]string {
	h := map[string][]string{HeaderToken: {epoch}, HeaderTask: {task}}
	if key != "" {
		h[HeaderIdempotencyKey] = []string{key}
	}
	return h
}

func requireHTTPProblem(t *testing.T, resp *http.Response, body, typ string, status int) {
	t.Helper()
	require.Equal(t, status, resp.StatusCode, body)
	require.Equal(t, ProblemContentType, resp.Header.Get("Content-Type"))
	var p Problem
	require.NoError(t, json.Unmarshal([]byte(body), &p))
	require.Equal(t, typ, p.Type)
	require.Equal(t, status, p.Status)
}

func TestMiddlewareHTTP(t *testing.T) {
	fx := newHTTPFixture(t, MiddlewareConfig{})

	resp, _ := fx.do(t, http.MethodGet, "/things", "", nil)
	require.Equal(t, http.StatusCreated, resp.StatusCode, "reads pass unfenced")

	resp, body := fx.do(t, http.MethodPost, "/things", "x", nil)
	requireHTTPProblem(t, resp, body, ProblemMissingToken, 400)

	resp, body = fx.do(t, http.MethodPost, "/things", "x", map[string][]string{HeaderToken: {"5", "6"}, HeaderTask: {"t"}})
	requireHTTPProblem(t, resp, body, ProblemMalformedToken, 400)

	resp, body = fx.do(t, http.MethodPut, "/things", "x", fenceHeaders("007", "t", ""))
	requireHTTPProblem(t, resp, body, ProblemMalformedToken, 400)

	resp, first := fx.do(t, http.MethodPost, "/things", "hello", fenceHeaders("5", "t", "k1"))
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Contains(t, first, `"body":"hello"`, "the handler still reads the body")
	require.Contains(t, first, `"epoch":5`)
	require.NotEmpty(t, resp.Cookies(), "the caller that ran the write gets its cookies")
	require.Empty(t, resp.Header.Get(HeaderReplayed))

	resp, again := fx.do(t, http.MethodPost, "/things", "hello", fenceHeaders("8", "t", "k1"))
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, first, again)
	require.Equal(t, "true", resp.Header.Get(HeaderReplayed))
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.Empty(t, resp.Cookies(), "cookies are never replayed")

	resp, body = fx.do(t, http.MethodPost, "/things", "other", fenceHeaders("8", "t", "k1"))
	requireHTTPProblem(t, resp, body, ProblemPayloadMismatch, 422)

	resp, body = fx.do(t, http.MethodPost, "/things", "hello", fenceHeaders("5", "t", "k1"))
	requireHTTPProblem(t, resp, body, ProblemStaleToken, 409)
	require.Contains(t, body, `"max_seen_epoch":"8"`)
	require.EqualValues(t, 2, fx.runs.Load(), "the GET and the first write; never the replay")
}

func TestMiddlewareHTTPPanicReleasesClaim(t *testing.T) {
	fx := newHTTPFixture(t, MiddlewareConfig{})
	req, err := http.NewRequest(http.MethodPost, fx.srv.URL+"/panic", strings.NewReader("x"))
	require.NoError(t, err)
	req.Header.Set(HeaderToken, "1")
	req.Header.Set(HeaderTask, "t")
	req.Header.Set(HeaderIdempotencyKey, "k")
	_, err = fx.srv.Client().Do(req)
	require.Error(t, err, "net/http drops the connection of a panicking handler")
	_, records := fx.store.Len()
	require.Zero(t, records)

	resp, _ := fx.do(t, http.MethodPost, "/fail", "x", fenceHeaders("1", "t", "k"))
	require.Equal(t, 500, resp.StatusCode)
	_, records = fx.store.Len()
	require.Zero(t, records, "a 5xx is not recorded")
}

func TestMiddlewareHTTPHooks(t *testing.T) {
	fx := newHTTPFixture(t, MiddlewareConfig{
		Config: Config{
			IsWrite:      func(method, path string) bool { return method == http.MethodPost && path != "/search" },
			MaxBodyBytes: 8,
		},
		Scope: func(r *http.Request, task string) (string, error) {
			tenant := r.Header.Get("X-Tenant")
			if tenant == "" {
				return "", ErrScope
			}
			return tenant, nil
		},
	})
	resp, _ := fx.do(t, http.MethodPost, "/search", "q", nil)
	require.Equal(t, http.StatusCreated, resp.StatusCode, "a POST declared a read")
	resp, _ = fx.do(t, http.MethodDelete, "/x", "", nil)
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	resp, body := fx.do(t, http.MethodPost, "/x", "q", fenceHeaders("3", "t", ""))
	requireHTTPProblem(t, resp, body, ProblemScope, 403)

	h := fenceHeaders("9", "t", "")
	h["X-Tenant"] = []string{"acme"}
	resp, body = fx.do(t, http.MethodPost, "/x", "q", h)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Contains(t, body, `"tenant":"acme"`)

	h = fenceHeaders("3", "t", "")
	h["X-Tenant"] = []string{"globex"}
	resp, _ = fx.do(t, http.MethodPost, "/x", "q", h)
	require.Equal(t, http.StatusCreated, resp.StatusCode, "another tenant's task t is another task")

	h = fenceHeaders("9", "t", "big")
	h["X-Tenant"] = []string{"acme"}
	resp, body = fx.do(t, http.MethodPost, "/x", "123456789", h)
	requireHTTPProblem(t, resp, body, ProblemBodyTooLarge, 413)
}
