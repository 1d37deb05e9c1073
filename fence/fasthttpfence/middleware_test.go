package fasthttpfence

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/fence/sqlstore"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"
	"go.uber.org/goleak"
	_ "modernc.org/sqlite"
)

func TestMain(m *testing.M) {
	// fasthttp refreshes its Date header from one process-wide goroutine.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"))
}

// serve runs h on 127.0.0.1:0 until the test ends and returns its URL
// and an HTTP client.
func serve(t *testing.T, h fasthttp.RequestHandler) (string, *http.Client) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	// A short idle-worker period lets the pool's cleaner goroutine notice
	// Shutdown quickly (goleak checks at exit).
	srv := &fasthttp.Server{Handler: h, MaxIdleWorkerDuration: 50 * time.Millisecond}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(func() {
		client.CloseIdleConnections()
		require.NoError(t, srv.Shutdown())
		require.NoError(t, <-done)
	})
	return "http://" + ln.Addr().String(), client
}

func do(t *testing.T, c *http.Client, method, url, body string, headers map[string][]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	for k, vs := range headers {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

func hdrs(epoch, task, key string) map[string][]string {
	h := map[string][]string{fence.HeaderToken: {epoch}, fence.HeaderTask: {task}}
	if key != "" {
		h[fence.HeaderIdempotencyKey] = []string{key}
	}
	return h
}

func requireProblem(t *testing.T, resp *http.Response, body, typ string, status int) {
	t.Helper()
	require.Equal(t, status, resp.StatusCode, body)
	require.Equal(t, fence.ProblemContentType, resp.Header.Get("Content-Type"))
	var p fence.Problem
	require.NoError(t, json.Unmarshal([]byte(body), &p))
	require.Equal(t, typ, p.Type)
}

func newMem(t *testing.T) *fence.MemStore {
	s, err := fence.NewMemStore(fence.MemStoreConfig{})
	require.NoError(t, err)
	return s
}

func TestMiddlewareFastHTTP(t *testing.T) {
	var runs atomic.Int64
	store := newMem(t)
	mw, err := New(Config{
		Config: fence.Config{Store: store, MaxBodyBytes: 16},
		Scope: func(rc *fasthttp.RequestCtx, task string) (string, error) {
			if task == "forbidden" {
				return "", fmt.Errorf("%w: not ours", fence.ErrScope)
			}
			return string(rc.Request.Header.Peek("X-Tenant")), nil
		},
	})
	require.NoError(t, err)
	url, c := serve(t, mw.Wrap(func(rc *fasthttp.RequestCtx) {
		if string(rc.Path()) == "/fail" {
			rc.Error("down", fasthttp.StatusBadGateway)
			return
		}
		n := runs.Add(1)
		w, fenced := WriteFromRequest(rc)
		rc.Response.Header.SetCookie(func() *fasthttp.Cookie {
			ck := fasthttp.AcquireCookie()
			ck.SetKey("session")
			ck.SetValue("secret")
			return ck
		}())
		rc.SetContentType("application/json")
		rc.SetStatusCode(fasthttp.StatusCreated)
		_ = json.NewEncoder(rc).Encode(map[string]any{"run": n, "body": string(rc.PostBody()), "fenced": fenced, "epoch": w.Epoch, "tenant": w.Key.Tenant})
	}))

	resp, _ := do(t, c, http.MethodGet, url+"/x", "", nil)
	require.Equal(t, http.StatusCreated, resp.StatusCode, "reads pass")

	resp, body := do(t, c, http.MethodPost, url+"/x", "b", nil)
	requireProblem(t, resp, body, fence.ProblemMissingToken, 400)
	resp, body = do(t, c, http.MethodPost, url+"/x", "b", map[string][]string{fence.HeaderToken: {"3", "4"}, fence.HeaderTask: {"t"}})
	requireProblem(t, resp, body, fence.ProblemMalformedToken, 400)
	resp, body = do(t, c, http.MethodPost, url+"/x", "b", map[string][]string{fence.HeaderToken: {"3"}})
	requireProblem(t, resp, body, fence.ProblemMissingTask, 400)
	resp, body = do(t, c, http.MethodPost, url+"/x", "b", hdrs("3", "forbidden", ""))
	requireProblem(t, resp, body, fence.ProblemScope, 403)
	resp, body = do(t, c, http.MethodPost, url+"/x", strings.Repeat("b", 17), hdrs("3", "t", "big"))
	requireProblem(t, resp, body, fence.ProblemBodyTooLarge, 413)

	resp, first := do(t, c, http.MethodPost, url+"/x?a=1", "hello", hdrs("3", "t", "k1"))
	require.Equal(t, http.StatusCreated, resp.StatusCode, first)
	require.Contains(t, first, `"epoch":3`)
	require.Contains(t, first, `"body":"hello"`)
	require.NotEmpty(t, resp.Cookies())

	resp, again := do(t, c, http.MethodPost, url+"/x?a=1", "hello", hdrs("7", "t", "k1"))
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, first, again, "reclaim: the new owner gets the recorded response")
	require.Equal(t, "true", resp.Header.Get(fence.HeaderReplayed))
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.Empty(t, resp.Cookies())

	resp, body = do(t, c, http.MethodPost, url+"/x?a=2", "hello", hdrs("7", "t", "k1"))
	requireProblem(t, resp, body, fence.ProblemPayloadMismatch, 422)
	resp, body = do(t, c, http.MethodPost, url+"/x", "hello", hdrs("3", "t", "k2"))
	requireProblem(t, resp, body, fence.ProblemStaleToken, 409)

	h := hdrs("3", "t", "")
	h["X-Tenant"] = []string{"other"}
	resp, body = do(t, c, http.MethodPost, url+"/x", "hello", h)
	require.Equal(t, http.StatusCreated, resp.StatusCode, "tenant other's task t is another task")
	require.Contains(t, body, `"tenant":"other"`)

	resp, _ = do(t, c, http.MethodPost, url+"/fail", "x", hdrs("7", "t", "k9"))
	require.Equal(t, fasthttp.StatusBadGateway, resp.StatusCode)
	_, records := store.Len()
	require.Equal(t, 1, records, "only k1 is recorded; the 502 released k9")
	require.EqualValues(t, 3, runs.Load())
}

// TestMiddlewareFastHTTPPanicReleasesClaim calls the wrapped handler
// directly: fasthttp itself does not recover handler panics.
func TestMiddlewareFastHTTPPanicReleasesClaim(t *testing.T) {
	store := newMem(t)
	mw, err := New(Config{Config: fence.Config{Store: store}})
	require.NoError(t, err)
	crash := true
	h := mw.Wrap(func(rc *fasthttp.RequestCtx) {
		if crash {
			panic("handler crashed")
		}
		rc.SetStatusCode(200)
	})
	var req fasthttp.Request
	req.Header.SetMethod("POST")
	req.SetRequestURI("/x")
	req.Header.Set(fence.HeaderToken, "1")
	req.Header.Set(fence.HeaderTask, "t")
	req.Header.Set(fence.HeaderIdempotencyKey, "k")
	rc := &fasthttp.RequestCtx{}
	rc.Init(&req, nil, nil)
	require.Panics(t, func() { h(rc) })
	_, records := store.Len()
	require.Zero(t, records)
	crash = false
	h(rc)
	require.Equal(t, 200, rc.Response.StatusCode())
	require.Empty(t, rc.Response.Header.Peek(fence.HeaderReplayed))
}

// TestMiddlewareFastHTTPWithSQL: the handler's statement runs in the
// store's transaction, reached through Context(rc); a stale write leaves
// no row.
func TestMiddlewareFastHTTPWithSQL(t *testing.T) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "svc.db")+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	store, err := sqlstore.New(sqlstore.Config{DB: db, Dialect: sqlstore.SQLite})
	require.NoError(t, err)
	require.NoError(t, store.Migrate(context.Background()))
	_, err = db.Exec(`CREATE TABLE notes (task TEXT, epoch INTEGER, body TEXT)`)
	require.NoError(t, err)
	mw, err := New(Config{Config: fence.Config{Store: store}})
	require.NoError(t, err)
	url, c := serve(t, mw.Wrap(func(rc *fasthttp.RequestCtx) {
		ctx := Context(rc)
		tx, ok := sqlstore.TxFromContext(ctx)
		if !ok {
			rc.Error("no tx", 500)
			return
		}
		w, _ := fence.WriteFromContext(ctx)
		if _, err := tx.ExecContext(ctx, `INSERT INTO notes VALUES (?, ?, ?)`, w.Key.Task, int64(w.Epoch), string(rc.PostBody())); err != nil {
			rc.Error(err.Error(), 500)
			return
		}
		rc.SetStatusCode(201)
	}))
	resp, body := do(t, c, http.MethodPost, url+"/n", "new owner", hdrs("9", "t", ""))
	require.Equal(t, 201, resp.StatusCode, body)
	resp, body = do(t, c, http.MethodPost, url+"/n", "old owner", hdrs("8", "t", ""))
	requireProblem(t, resp, body, fence.ProblemStaleToken, 409)
	var n int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM notes`).Scan(&n))
	require.Equal(t, 1, n)
}
