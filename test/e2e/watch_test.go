package e2e

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/proxy"
	"github.com/fencepost/fencepost/proxy/cluster"
	"github.com/fencepost/fencepost/test/scenario"
)

// TestRevokeReachesSidecarBeforeNextHeartbeat: with a 10 s heartbeat
// interval, an operator's revoke must block the worker's writes within a
// round trip (the sidecar's session watch), not up to 10 s later at the
// next heartbeat. The bound below is a third of the interval, so the test
// fails if the signal only rides the heartbeat.
func TestRevokeReachesSidecarBeforeNextHeartbeat(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const interval = 10 * time.Second
	cl, err := scenario.StartCluster(ctx, scenario.ClusterConfig{Nodes: 1, Dir: t.TempDir(), TTL: 3 * interval, Heartbeat: interval})
	require.NoError(t, err)
	defer func() { require.NoError(t, cl.Close()) }()
	cc, err := cluster.New(cluster.Config{Endpoints: cl.Endpoints()})
	require.NoError(t, err)
	defer cc.Close()

	sc, err := proxy.New(proxy.Config{
		WorkerID: "worker-watch", ProxyAddr: "127.0.0.1:0", ControlAddr: "127.0.0.1:0",
		Task: "watch-task", Profile: scenario.ProfileName, SessionHeartbeat: interval,
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)), Registerer: prometheus.NewRegistry(),
		DrainTimeout: time.Second, Endpoints: cl.Endpoints(),
	}, nil)
	require.NoError(t, err)
	require.NoError(t, sc.Start(ctx))
	defer func() { require.NoError(t, sc.Shutdown(context.Background())) }()
	events, unsubscribe := sc.Subscribe()
	defer unsubscribe()
	waitFor(t, func() bool { return len(sc.Leases()) == 1 && sc.Leases()[0].Current }, "one-task mode holds the lease")

	start := time.Now()
	_, err = cc.Revoke(ctx, "watch-task", api.RevokeRequest{Reason: "operator"})
	require.NoError(t, err)
	select {
	case <-waitKind(events, proxy.EventRevoked):
	case <-time.After(interval / 3):
		t.Fatalf("revocation not seen %s after the revoke; the sidecar waits for its heartbeat", interval/3)
	}
	t.Logf("revocation reached the sidecar after %s", time.Since(start))

	// And the worker's next write is refused without leaving the pod.
	proxyURL := &url.URL{Scheme: "http", Host: sc.ProxyAddr(), User: url.User("watch-task")}
	tr := &http.Transport{Proxy: http.ProxyURL(proxyURL)}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Post("http://127.0.0.1:1/never", "text/plain", strings.NewReader("x"))
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusConflict, resp.StatusCode, string(b))
	require.Contains(t, string(b), proxy.CodeLeaseRevoked)
}

// waitKind returns a channel closed when an event of kind arrives.
func waitKind(ch <-chan proxy.Event, kind proxy.EventKind) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		for ev := range ch {
			if ev.Kind == kind {
				close(done)
				return
			}
		}
	}()
	return done
}
