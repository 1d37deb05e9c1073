package proxy

import (
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/proxytest"
)

func TestOneTaskModeAcquiresAndShutdownGivesBack(t *testing.T) {
	fc := newFakeCluster()
	// Someone else holds it at first: the sidecar keeps retrying.
	fc.Leases["solo"] = &proxytest.Lease{Epoch: 50, Sid: "other", Status: lease.StatusActive}
	cfg := baseConfig(t)
	cfg.Task = "solo"
	s, err := New(cfg, fc)
	require.NoError(t, err)
	require.NoError(t, s.Start(context.Background()))
	code, _ := ctl(t, s, "GET", PathReady, "")
	require.Equal(t, 503, code, "not ready without the lease")
	fc.Mu.Lock()
	delete(fc.Leases, "solo")
	fc.Mu.Unlock()
	eventually(t, func() bool { c, _ := ctl(t, s, "GET", PathReady, ""); return c == 200 }, "ready with the lease")

	// A write is in flight when shutdown starts: the sidecar keeps the
	// lease (and heartbeats) until it finishes, then gives the lease back.
	release := make(chan struct{})
	up := startUpstream(t, func(ctx *fasthttp.RequestCtx) { <-release })
	c := proxyClient(t, s, "")
	done := make(chan int, 1)
	go func() {
		resp, err := c.Post("http://"+up.addr()+"/w", "text/plain", nil)
		if err != nil {
			done <- -1
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		done <- resp.StatusCode
	}()
	eventually(t, func() bool { return len(up.requests()) == 1 }, "write in flight")
	stopped := make(chan error, 1)
	go func() { stopped <- s.Shutdown(context.Background()) }()
	eventually(t, func() bool { ok, _ := s.ready(); return !ok }, "draining")
	fc.Mu.Lock()
	require.Empty(t, fc.Releases, "not released while a write is in flight")
	fc.Mu.Unlock()
	close(release)
	require.Equal(t, 200, <-done)
	require.NoError(t, <-stopped)
	fc.Mu.Lock()
	defer fc.Mu.Unlock()
	require.Len(t, fc.Releases, 1)
	require.Equal(t, lease.OutcomeGivenBack, fc.Releases[0].Outcome)
	require.Equal(t, []string{"s1"}, fc.Closed)
	require.ErrorIs(t, s.Shutdown(context.Background()), ErrClosed)
	require.ErrorIs(t, s.Start(context.Background()), ErrClosed)
}

func TestStartErrors(t *testing.T) {
	fc := newFakeCluster()
	s := startSidecar(t, fc, baseConfig(t))
	require.ErrorIs(t, s.Start(context.Background()), ErrStarted)
	cfg := baseConfig(t)
	cfg.ProxyAddr = s.ProxyAddr() // taken
	s2, err := New(cfg, fc)
	require.NoError(t, err)
	require.Error(t, s2.Start(context.Background()))
	require.ErrorIs(t, s2.Shutdown(context.Background()), ErrNotStarted)
	_, err = New(baseConfig(t), nil)
	require.ErrorIs(t, err, ErrInvalidConfig, "no client and no endpoints")
	cfg = baseConfig(t)
	cfg.Endpoints = []string{"127.0.0.1:1"}
	s3, err := New(cfg, nil)
	require.NoError(t, err, "builds its own cluster client")
	require.Len(t, s3.owned, 1)
	s3.owned[0].Close()
}

func TestShutdownGivesBackEvenWithEndedContext(t *testing.T) {
	fc := newFakeCluster()
	s := startSidecar(t, fc, baseConfig(t))
	mustAcquire(t, s, "t")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, s.Shutdown(ctx))
	fc.Mu.Lock()
	defer fc.Mu.Unlock()
	require.Len(t, fc.Releases, 1)
	require.Len(t, fc.Closed, 1)
}
