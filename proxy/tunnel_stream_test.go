package proxy

import (
	"bufio"
	"io"
	"net"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/mitm"
)

// sseUpstream streams "data: first", then waits for release (or 5 s).
func sseUpstream(release <-chan struct{}) func(*fasthttp.RequestCtx) {
	return func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("text/event-stream")
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
			_, _ = w.WriteString("data: first\n\n")
			_ = w.Flush()
			select {
			case <-release:
			case <-time.After(5 * time.Second):
			}
			_, _ = w.WriteString("data: second\n\n")
			_ = w.Flush()
		})
	}
}

func TestInterceptedSSEStreamsAndWriteStreamIsCutOnLeaseLoss(t *testing.T) {
	release := make(chan struct{})
	ca := newTestCA(t, mitm.Config{Hosts: []string{"127.0.0.1"}})
	up := startTLSUpstream(t, ca, "127.0.0.1", sseUpstream(release))
	fc := newFakeCluster()
	s := startSidecar(t, fc, interceptConfig(t, ca.file))
	mustAcquire(t, s, "t1")
	c := httpsClient(t, s, "t1")

	// A streamed read: the first event arrives while the upstream waits.
	resp, err := c.Get("https://" + up.addr() + "/sse")
	require.NoError(t, err)
	buf := make([]byte, 64)
	n, err := resp.Body.Read(buf)
	require.NoError(t, err)
	require.Equal(t, "data: first\n\n", string(buf[:n]))
	close(release)
	rest, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "data: second\n\n", string(rest))
	_ = resp.Body.Close()

	// A streamed write (a POST whose answer streams) is cut the moment the
	// lease is lost.
	hold := make(chan struct{})
	defer close(hold)
	up2 := startTLSUpstream(t, ca, "127.0.0.1", sseUpstream(hold))
	resp, err = c.Post("https://"+up2.addr()+"/run", "text/plain", strings.NewReader("go"))
	require.NoError(t, err)
	n, err = resp.Body.Read(buf)
	require.NoError(t, err)
	require.Equal(t, "data: first\n\n", string(buf[:n]))
	fc.Signal("t1", api.SignalRevoked, lease.StatusRevoked)
	s.keeper.HeartbeatOnce(t.Context())
	_, err = io.ReadAll(resp.Body)
	require.Error(t, err, "the stream must be cut, not completed")
	_ = resp.Body.Close()
}

// TestIdleUpstreamClosedByServerIsNotA502: the server closes idle
// connections sooner than the sidecar's pool does; the next write must
// go out on a fresh connection, not fail with 502.
func TestIdleUpstreamClosedByServerIsNotA502(t *testing.T) {
	closed := make(chan struct{}, 8)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	up := startUpstreamOn(t, ln, nil, func(srv *fasthttp.Server) {
		srv.IdleTimeout = 200 * time.Millisecond
		srv.ConnState = func(_ net.Conn, st fasthttp.ConnState) {
			if st == fasthttp.StateClosed {
				closed <- struct{}{}
			}
		}
	})
	cfg := baseConfig(t)
	cfg.UpstreamIdleTimeout = time.Minute // only the liveness check can save the write
	s := startSidecar(t, newFakeCluster(), cfg)
	mustAcquire(t, s, "t1")
	c := proxyClient(t, s, "")
	for i := range 3 {
		resp, err := c.Post("http://"+up.addr()+"/w", "text/plain", strings.NewReader("x"))
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode, "write %d: %s", i, b)
		if i < 2 {
			select {
			case <-closed: // the server closed the pooled connection
			case <-time.After(10 * time.Second):
				t.Fatal("the upstream never closed the idle connection")
			}
		}
	}
	require.Len(t, up.requests(), 3, "each write arrives exactly once")
}

// TestNewOwnerReplayingADifferentWriteIsToldWhy: the takeover case with
// generated keys. The old owner's write 1 after checkpoint 0 was
// amount=5; the new owner resumes from the same checkpoint and sends
// amount=7 as its write 1, under the same derived key: the downstream's
// 422 payload mismatch comes back as the explicit problem.
func TestNewOwnerReplayingADifferentWriteIsToldWhy(t *testing.T) {
	var mu sync.Mutex
	bodies := map[string]string{}
	up := startUpstream(t, func(ctx *fasthttp.RequestCtx) {
		mu.Lock()
		defer mu.Unlock()
		k := string(ctx.Request.Header.Peek(fence.HeaderIdempotencyKey))
		if b, ok := bodies[k]; ok && b != string(ctx.PostBody()) {
			p := fence.ProblemFor(fence.ErrPayloadMismatch)
			ctx.SetStatusCode(p.Status)
			ctx.SetContentType("application/problem+json")
			ctx.SetBody(p.JSON())
			return
		}
		bodies[k] = string(ctx.PostBody())
		ctx.SetStatusCode(201)
	})
	fc := newFakeCluster()
	s := startSidecar(t, fc, baseConfig(t))
	mustAcquire(t, s, "t")
	url := "http://" + up.addr() + "/charge"
	resp, body := doReq(t, proxyClient(t, s, ""), "POST", url, "amount=5", nil)
	require.Equal(t, 201, resp.StatusCode, body)

	// Taken over: a new lease, resuming from the same (no) checkpoint.
	fc.Signal("t", api.SignalRevoked, lease.StatusRevoked)
	s.keeper.HeartbeatOnce(t.Context())
	mustAcquire(t, s, "t")
	resp, body = doReq(t, proxyClient(t, s, ""), "POST", url, "amount=7", nil)
	require.Equal(t, 422, resp.StatusCode, body)
	require.Equal(t, "false", resp.Header.Get(HeaderShouldRetry))
	p := problemOf(t, body)
	require.Equal(t, api.ProblemTypeBase+CodeWriteAlreadyPerformed, p.Type)
	require.Contains(t, p.Detail, "write 1 after checkpoint 0")
	require.Contains(t, p.Detail, "the downstream answered: 422 "+path.Base(fence.ProblemPayloadMismatch)+` "`, "the downstream's problem in words")
	require.NotContains(t, p.Detail, "?", "no quote of the downstream's body turned into '?'")

	// The next write gets the next derived key and goes on as usual.
	resp, body = doReq(t, proxyClient(t, s, ""), "POST", url, "amount=5", nil)
	require.Equal(t, 201, resp.StatusCode, body)
}
