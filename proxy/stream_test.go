package proxy

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/request"
)

func TestStreamingResponsePassesThroughUnbuffered(t *testing.T) {
	release := make(chan struct{})
	up := startUpstream(t, sseUpstream(release))
	fc := newFakeCluster()
	s := startSidecar(t, fc, baseConfig(t))
	mustAcquire(t, s, "t")
	c := proxyClient(t, s, "")
	resp, err := c.Get("http://" + up.addr() + "/sse")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	buf := make([]byte, 64)
	n, err := resp.Body.Read(buf)
	require.NoError(t, err)
	require.Equal(t, "data: first\n\n", string(buf[:n]), "first chunk arrives while the upstream is still streaming")
	close(release)
	rest, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "data: second\n\n", string(rest))
}

func TestInFlightWriteCutWhenLeaseLost(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	arrived := make(chan struct{}, 1)
	up := startUpstream(t, func(ctx *fasthttp.RequestCtx) {
		arrived <- struct{}{}
		select {
		case <-hold:
		case <-time.After(5 * time.Second):
		}
	})
	fc := newFakeCluster()
	s := startSidecar(t, fc, baseConfig(t))
	mustAcquire(t, s, "t")
	c := proxyClient(t, s, "")
	type result struct {
		status int
		body   string
	}
	done := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest("POST", "http://"+up.addr()+"/slow", nil)
		resp, err := c.Do(req)
		if err != nil {
			done <- result{status: -1, body: err.Error()}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		done <- result{resp.StatusCode, string(b)}
	}()
	<-arrived
	start := time.Now()
	fc.Signal("t", api.SignalRevoked, lease.StatusRevoked)
	s.keeper.HeartbeatOnce(t.Context())
	r := <-done
	require.Less(t, time.Since(start), 2*time.Second, "cut, not waited out")
	require.Equal(t, 502, r.status, r.body)
	require.Equal(t, api.ProblemTypeBase+CodeLeaseLostMid, problemOf(t, r.body).Type)
}

func TestUpstreamHangAndReset(t *testing.T) {
	hang := make(chan struct{})
	defer close(hang)
	up := startUpstream(t, func(ctx *fasthttp.RequestCtx) {
		select {
		case <-hang:
		case <-time.After(5 * time.Second):
		}
	})
	// An upstream that accepts and resets every connection.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	stop := make(chan struct{})
	go func() {
		defer close(stop)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = c.Close()
		}
	}()
	defer func() { _ = ln.Close(); <-stop }()

	fc := newFakeCluster()
	cfg := baseConfig(t)
	cfg.UpstreamTimeout = 300 * time.Millisecond
	s := startSidecar(t, fc, cfg)
	mustAcquire(t, s, "t")
	c := proxyClient(t, s, "")
	resp, body := doReq(t, c, "GET", "http://"+up.addr()+"/hang", "", nil)
	require.Equal(t, 504, resp.StatusCode, body)
	require.Equal(t, api.ProblemTypeBase+CodeUpstreamTimeout, problemOf(t, body).Type)
	resp, body = doReq(t, c, "POST", "http://"+ln.Addr().String()+"/reset", "x", nil)
	require.Equal(t, 502, resp.StatusCode, body)
	require.Equal(t, api.ProblemTypeBase+CodeUpstreamError, problemOf(t, body).Type)
	// Still serving.
	resp, _ = doReq(t, c, "GET", "http://"+up.addr()+"/hang", "", nil)
	require.Equal(t, 504, resp.StatusCode)
}

func TestResponseBodyBounded(t *testing.T) {
	up := startUpstream(t, func(ctx *fasthttp.RequestCtx) {
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
			chunk := make([]byte, 1024)
			for i := 0; i < 64; i++ {
				_, _ = w.Write(chunk)
				_ = w.Flush()
			}
		})
	})
	fc := newFakeCluster()
	cfg := baseConfig(t)
	cfg.MaxResponseBody = 10 << 10
	s := startSidecar(t, fc, cfg)
	c := proxyClient(t, s, "")
	resp, err := c.Get("http://" + up.addr() + "/big")
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Error(t, err, "the stream is cut, not completed")
	require.LessOrEqual(t, len(b), 10<<10)
}

// A response announced larger than MaxResponseBody is the upstream's
// fault: 502 upstream-too-large, never the 413 too-large of a request
// body the worker sent too large.
func TestResponseTooLargeIsUpstreamTooLarge(t *testing.T) {
	big := strings.Repeat("r", 20<<10)
	up := startUpstream(t, func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString(big) })
	cfg := baseConfig(t)
	cfg.MaxResponseBody = 10 << 10
	s := startSidecar(t, newFakeCluster(), cfg)
	resp, body := doReq(t, proxyClient(t, s, ""), "GET", "http://"+up.addr()+"/big", "", nil)
	require.Equal(t, 502, resp.StatusCode, body)
	var p api.Problem
	require.NoError(t, json.Unmarshal([]byte(body), &p), body)
	require.Equal(t, CodeUpstreamTooLarge, p.Code)
	require.Equal(t, 502, p.Status)
}

func TestClientGoneMidStreamReleasesUpstream(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	up := startUpstream(t, func(ctx *fasthttp.RequestCtx) {
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
			for {
				if _, err := w.WriteString("tick\n"); err != nil {
					return
				}
				if w.Flush() != nil {
					return
				}
				select {
				case <-stop:
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		})
	})
	fc := newFakeCluster()
	s := startSidecar(t, fc, baseConfig(t))
	c := proxyClient(t, s, "")
	resp, err := c.Get("http://" + up.addr() + "/ticks")
	require.NoError(t, err)
	buf := make([]byte, 5)
	_, err = io.ReadFull(resp.Body, buf)
	require.NoError(t, err)
	require.Equal(t, int64(1), s.pipe.InFlight(), "the relay is in flight")
	require.NoError(t, resp.Body.Close()) // the worker hangs up mid-stream
	eventually(t, func() bool { return s.pipe.InFlight() == 0 }, "relay closed after the worker left")
}

func TestMetricsCountDecisions(t *testing.T) {
	fc := newFakeCluster()
	up := startUpstream(t, nil)
	s := startSidecar(t, fc, baseConfig(t))
	c := proxyClient(t, s, "")
	doReq(t, c, "POST", "http://"+up.addr()+"/w", "x", nil)                  // blocked: none
	doReq(t, c, "GET", "http://"+up.addr()+"/r", "", nil)                    // forwarded
	rawExchange(t, s.ProxyAddr(), "GET /origin HTTP/1.1\r\nHost: x\r\n\r\n") // rejected
	require.Equal(t, 1.0, seriesValue(t, s, "fencepost_sidecar_requests_total", request.DecisionBlocked))
	require.Equal(t, 1.0, seriesValue(t, s, "fencepost_sidecar_requests_total", request.DecisionForwarded))
	require.Equal(t, 1.0, seriesValue(t, s, "fencepost_sidecar_requests_total", request.DecisionRejected))
	require.Equal(t, 1.0, seriesValue(t, s, "fencepost_sidecar_writes_blocked_total", "none"))
}
