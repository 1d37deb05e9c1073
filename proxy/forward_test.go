package proxy

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

func doReq(t *testing.T, c *http.Client, method, url string, body string, hdr map[string][]string) (*http.Response, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	require.NoError(t, err)
	for k, vs := range hdr {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return resp, string(b)
}

func problemOf(t *testing.T, body string) api.Problem {
	t.Helper()
	var p api.Problem
	require.NoError(t, json.Unmarshal([]byte(body), &p), body)
	return p
}

func TestForwardStampsExactlyOneSet(t *testing.T) {
	fc := newFakeCluster()
	fc.Signature = "ed25519=k1:c2ln"
	up := startUpstream(t, nil)
	s := startSidecar(t, fc, baseConfig(t))
	g := mustAcquire(t, s, "task-1")
	c := proxyClient(t, s, "")

	resp, body := doReq(t, c, "POST", "http://"+up.addr()+"/a/b%2Fc/../d?x=1", "payload", map[string][]string{
		"X-Fencing-Token":       {"999999", "1"},
		"x-fencing-task":        {"forged"},
		"X-Fencing-Holder":      {"mallory"},
		"Connection":            {"X-Drop-Me"},
		"X-Drop-Me":             {"secret"},
		"Keep-Alive":            {"timeout=5"},
		"Te":                    {"trailers"},
		"Proxy-Connection":      {"keep-alive"},
		"X-Kept":                {"yes"},
		"X-Fencing-Task-Select": {"task-1"},
	})
	require.Equal(t, 200, resp.StatusCode, body)
	require.Equal(t, "ok", body)
	reqs := up.requests()
	require.Len(t, reqs, 1)
	r := reqs[0]
	require.Equal(t, []string{"101"}, r.values("X-Fencing-Token"))
	require.Equal(t, g.Lease.Epoch, uint64(101))
	require.Equal(t, []string{"task-1"}, r.values("X-Fencing-Task"))
	require.Equal(t, []string{"worker-1"}, r.values("X-Fencing-Holder"))
	require.Equal(t, []string{"ed25519=k1:c2ln"}, r.values("X-Fencing-Signature"))
	require.Empty(t, r.values("X-Fencing-Task-Select"))
	require.Len(t, r.values("Idempotency-Key"), 1)
	for _, h := range []string{"Connection", "X-Drop-Me", "Keep-Alive", "Te", "Proxy-Connection", "Proxy-Authorization"} {
		require.Empty(t, r.values(h), h)
	}
	require.Equal(t, []string{"yes"}, r.values("X-Kept"))
	require.Equal(t, "/a/b%2Fc/../d?x=1", r.URI, "path must not be normalised")
	require.Equal(t, up.addr(), r.Host)
	require.Equal(t, "payload", r.Body)
}

func TestWriteBlockedByReason(t *testing.T) {
	fc := newFakeCluster()
	up := startUpstream(t, nil)
	s := startSidecar(t, fc, baseConfig(t))
	c := proxyClient(t, s, "")

	// No lease at all.
	resp, body := doReq(t, c, "POST", "http://"+up.addr()+"/w", "x", nil)
	require.Equal(t, 409, resp.StatusCode)
	require.Equal(t, api.ProblemContentType, resp.Header.Get("Content-Type"))
	require.Equal(t, api.ProblemTypeBase+CodeNoLease, problemOf(t, body).Type)

	// Reads pass without a lease by default, unstamped.
	resp, _ = doReq(t, c, "GET", "http://"+up.addr()+"/r", "", nil)
	require.Equal(t, 200, resp.StatusCode)
	require.Empty(t, up.requests()[0].values("X-Fencing-Token"))

	// Revoked through the heartbeat.
	mustAcquire(t, s, "task-1")
	fc.Signal("task-1", api.SignalRevoked, lease.StatusRevoked)
	ev, cancel := s.Subscribe()
	defer cancel()
	s.keeper.HeartbeatOnce(t.Context())
	require.Equal(t, EventRevoked, (<-ev).Kind)
	resp, body = doReq(t, c, "PUT", "http://"+up.addr()+"/w", "x", nil)
	require.Equal(t, 409, resp.StatusCode)
	p := problemOf(t, body)
	require.Equal(t, api.ProblemTypeBase+CodeLeaseRevoked, p.Type)
	require.Equal(t, uint64(101), p.Epoch)
	require.Len(t, up.requests(), 1, "the blocked writes never reached the upstream")
}

func TestReadsBlockedByPolicy(t *testing.T) {
	fc := newFakeCluster()
	up := startUpstream(t, nil)
	cfg := baseConfig(t)
	cfg.ReadsWithoutLease = ReadsBlock
	s := startSidecar(t, fc, cfg)
	c := proxyClient(t, s, "")
	resp, body := doReq(t, c, "GET", "http://"+up.addr()+"/r", "", nil)
	require.Equal(t, 409, resp.StatusCode, body)
	require.Empty(t, up.requests())
	mustAcquire(t, s, "t")
	resp, _ = doReq(t, c, "GET", "http://"+up.addr()+"/r", "", nil)
	require.Equal(t, 200, resp.StatusCode)
	r := up.requests()[0]
	require.Equal(t, []string{"101"}, r.values("X-Fencing-Token"))
	require.Empty(t, r.values("Idempotency-Key"), "reads get no derived key")
}

func TestTaskSelection(t *testing.T) {
	fc := newFakeCluster()
	up := startUpstream(t, nil)
	s := startSidecar(t, fc, baseConfig(t))
	mustAcquire(t, s, "alpha") // epoch 101
	mustAcquire(t, s, "beta")  // epoch 102
	url := "http://" + up.addr() + "/w"

	// Two leases and no selection: ambiguous.
	resp, body := doReq(t, proxyClient(t, s, ""), "POST", url, "x", nil)
	require.Equal(t, 409, resp.StatusCode)
	require.Equal(t, api.ProblemTypeBase+CodeAmbiguousTask, problemOf(t, body).Type)
	// The problem names the held tasks and both ways to choose.
	var amb problem
	require.NoError(t, json.Unmarshal([]byte(body), &amb))
	require.Equal(t, []string{"alpha", "beta"}, amb.Tasks)
	for _, want := range []string{`"alpha"`, `"beta"`, "proxy user name", HeaderTaskSelect} {
		require.Contains(t, amb.Detail, want)
	}

	// Proxy user name selects.
	resp, _ = doReq(t, proxyClient(t, s, "beta"), "POST", url, "x", nil)
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, []string{"102"}, up.requests()[0].values("X-Fencing-Token"))
	require.Equal(t, []string{"beta"}, up.requests()[0].values("X-Fencing-Task"))

	// The header selects.
	resp, _ = doReq(t, proxyClient(t, s, ""), "POST", url, "x", map[string][]string{HeaderTaskSelect: {"alpha"}})
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, []string{"101"}, up.requests()[1].values("X-Fencing-Token"))

	// Disagreeing selections are refused; a task not held is blocked.
	resp, _ = doReq(t, proxyClient(t, s, "beta"), "POST", url, "x", map[string][]string{HeaderTaskSelect: {"alpha"}})
	require.Equal(t, 400, resp.StatusCode)
	resp, body = doReq(t, proxyClient(t, s, "gamma"), "POST", url, "x", nil)
	require.Equal(t, 409, resp.StatusCode)
	require.Equal(t, api.ProblemTypeBase+CodeNoLease, problemOf(t, body).Type)
	require.Len(t, up.requests(), 2)
}

func TestWorkerKeyPassesOnUnleasedRead(t *testing.T) {
	fc := newFakeCluster()
	up := startUpstream(t, nil)
	s := startSidecar(t, fc, baseConfig(t))
	resp, _ := doReq(t, proxyClient(t, s, ""), "GET", "http://"+up.addr()+"/r", "", map[string][]string{"Idempotency-Key": {"k-1"}})
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, []string{"k-1"}, up.requests()[0].values("Idempotency-Key"))
}

// TestSmallBodyCutShort: a small response whose body ends before its
// Content-Length is read in the handler, so the worker gets a 502
// problem instead of a reply cut off after its header.
func TestSmallBodyCutShort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	served := make(chan struct{})
	go func() {
		defer close(served)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 4096)
		_, _ = c.Read(buf)
		_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort"))
	}()
	s := startSidecar(t, newFakeCluster(), baseConfig(t))
	mustAcquire(t, s, "small")
	resp, err := proxyClient(t, s, "").Get("http://" + ln.Addr().String() + "/r")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusBadGateway, resp.StatusCode)
	require.Equal(t, api.ProblemTypeBase+CodeUpstreamError, problemOf(t, string(body)).Type)
	<-served
}
