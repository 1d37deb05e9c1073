package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/proxy"
	"github.com/fencepost/fencepost/proxy/cluster"
	"github.com/fencepost/fencepost/test/netfault"
	"github.com/fencepost/fencepost/test/scenario"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, append(netfault.LeakOptions(),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*Client).mCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
	)...)
}

// recorder is a loopback upstream that records the fencing token of every
// request it receives.
type recorder struct {
	mu     sync.Mutex
	tokens []string
}

func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.tokens...)
}

func TestSidecarAgainstRealCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := scenario.StartCluster(ctx, scenario.ClusterConfig{Nodes: 1, Dir: t.TempDir(), TTL: 3 * time.Second})
	require.NoError(t, err)
	defer func() { require.NoError(t, cl.Close()) }()
	// The operator's client (what fencepost ctl uses).
	cc, err := cluster.New(cluster.Config{Endpoints: cl.Endpoints()})
	require.NoError(t, err)
	defer cc.Close()

	rec := &recorder{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	up := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		rec.mu.Lock()
		rec.tokens = append(rec.tokens, string(ctx.Request.Header.Peek("X-Fencing-Token")))
		rec.mu.Unlock()
		ctx.SetBodyString("done")
	}, IdleTimeout: time.Second}
	served := make(chan struct{})
	go func() { defer close(served); _ = up.Serve(ln) }()
	defer func() { _ = up.Shutdown(); <-served }()

	sc, err := proxy.New(proxy.Config{
		WorkerID: "worker-e2e", ProxyAddr: "127.0.0.1:0", ControlAddr: "127.0.0.1:0",
		Task: "e2e-task", Profile: scenario.ProfileName,
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)), Registerer: prometheus.NewRegistry(),
		DrainTimeout: time.Second,
		Endpoints:    cl.Endpoints(), // the sidecar builds its own *cluster.Client
	}, nil)
	require.NoError(t, err)
	require.NoError(t, sc.Start(ctx))
	defer func() { require.NoError(t, sc.Shutdown(context.Background())) }()
	events, unsubscribe := sc.Subscribe()
	defer unsubscribe()

	waitFor(t, func() bool { return len(sc.Leases()) == 1 && sc.Leases()[0].Current }, "one-task mode holds the lease")
	epoch := sc.Leases()[0].Epoch

	proxyURL := &url.URL{Scheme: "http", Host: sc.ProxyAddr(), User: url.User("e2e-task")}
	tr := &http.Transport{Proxy: http.ProxyURL(proxyURL)}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	post := func() (int, string) {
		resp, err := client.Post("http://"+ln.Addr().String()+"/charge", "application/json", strings.NewReader(`{"amount":1}`))
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	// With the lease: the write arrives stamped with the current epoch.
	code, body := post()
	require.Equal(t, 200, code, body)
	require.Equal(t, []string{fence.FormatEpoch(epoch)}, rec.seen())

	// An operator revokes; the signal rides the next heartbeat.
	_, err = cc.Revoke(ctx, "e2e-task", api.RevokeRequest{Reason: "e2e"})
	require.NoError(t, err)
	waitEvent(t, events, proxy.EventRevoked)

	// The next write is refused by the sidecar; the upstream sees nothing.
	code, body = post()
	require.Equal(t, 409, code, body)
	require.Contains(t, body, api.ProblemTypeBase+proxy.CodeLeaseRevoked)
	require.Len(t, rec.seen(), 1)

	// Reads still pass (the default policy), unstamped.
	resp, err := client.Get("http://" + ln.Addr().String() + "/status")
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, []string{fence.FormatEpoch(epoch), ""}, rec.seen())

	// A new owner's sidecar gets the task with a higher epoch and its
	// writes arrive stamped with it; the old sidecar stays blocked.
	sc2, err := proxy.New(proxy.Config{
		WorkerID: "worker-e2e-2", ProxyAddr: "127.0.0.1:0", ControlAddr: "127.0.0.1:0",
		Task: "e2e-task", Profile: scenario.ProfileName, Endpoints: cl.Endpoints(),
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)), Registerer: prometheus.NewRegistry(),
		DrainTimeout: time.Second,
	}, nil)
	require.NoError(t, err)
	require.NoError(t, sc2.Start(ctx))
	defer func() { require.NoError(t, sc2.Shutdown(context.Background())) }()
	waitFor(t, func() bool { return len(sc2.Leases()) == 1 && sc2.Leases()[0].Current }, "the new owner holds the lease")
	epoch2 := sc2.Leases()[0].Epoch
	require.Greater(t, epoch2, epoch)
	tr2 := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: sc2.ProxyAddr()})}
	defer tr2.CloseIdleConnections()
	resp, err = (&http.Client{Transport: tr2, Timeout: 5 * time.Second}).Post("http://"+ln.Addr().String()+"/charge", "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, []string{fence.FormatEpoch(epoch), "", fence.FormatEpoch(epoch2)}, rec.seen())
	code, _ = post()
	require.Equal(t, 409, code)
	require.Len(t, rec.seen(), 3)
}

func waitEvent(t *testing.T, ch <-chan proxy.Event, kind proxy.EventKind) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			require.True(t, ok, "event stream closed")
			if ev.Kind == kind {
				return
			}
		case <-deadline:
			t.Fatalf("no %s event", kind)
		}
	}
}

func waitFor(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
