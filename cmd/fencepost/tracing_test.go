package main

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/config"
	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/fence/fenceotel"
	"github.com/fencepost/fencepost/test/otlprecv"
)

// The standard OTEL_* variables switch a role's tracing on as in any OTel
// program, and stopping the process flushes its last spans: they are at
// the collector when the command returns, with no waiting.
func TestFencedTracesFromTheOTelVariablesAndFlushesAtExit(t *testing.T) {
	recv := otlprecv.Start(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.URL())
	t.Setenv("OTEL_SERVICE_NAME", "fenced-under-test")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan int, 1)
	var out, errOut strings.Builder
	go func() { done <- run(ctx, []string{"fenced", "--addr", addr, "--log-format", "json"}, &out, &errOut) }()
	waitListening(t, addr)

	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/tasks/t1/writes", strings.NewReader("x"))
	require.NoError(t, err)
	req.Header.Set(fence.HeaderToken, "7")
	req.Header.Set(fence.HeaderTask, "t1")
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	req.Header.Set("traceparent", parent)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	cancel()
	require.Equal(t, exitOK, <-done, errOut.String())
	spans := recv.Spans()
	require.Len(t, spans, 1, otlprecv.Summary(spans))
	s := spans[0]
	require.Equal(t, "fenced-under-test", s.Service)
	require.Equal(t, "test", s.Resource["deployment.environment"])
	require.Equal(t, "0af7651916cd43dd8448eb211c80319c", s.TraceID)
	require.Equal(t, "b7ad6b7169203331", s.ParentID)
	require.Equal(t, "7", s.Attrs[string(fenceotel.Epoch)])
	require.Equal(t, fenceotel.VerdictAccepted, s.Attrs[string(fenceotel.Verdict)])
}

// waitListening polls until addr accepts a connection.
func waitListening(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
			return
		}
		require.True(t, time.Now().Before(deadline), "%s never listened: %v", addr, err)
		time.Sleep(20 * time.Millisecond)
	}
}

// fencepost dev --trace-console prints the spans of every part on stdout,
// each as one JSON line, as they end.
func TestDevTraceConsolePrintsSpans(t *testing.T) {
	fs := newFlagSet("dev")
	flags := config.BindFlags(fs, config.RoleDev)
	require.NoError(t, fs.Parse([]string{"--trace-console", "--data-dir", t.TempDir(), "--ports-http=0", "--ports-raft=0",
		"--ports-proxy=0", "--ports-control=0", "--ports-fenced=0", "--ports-fenced-tls=0", "--ports-console=0"}))
	var errOut strings.Builder
	cfg, code := loadRole[*config.Dev](config.RoleDev, flags, "dev", &errOut)
	require.Equal(t, exitOK, code, errOut.String())
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out lockedBuffer
	done := make(chan error, 1)
	go func() { done <- serveDev(ctx, cfg, zap.NewNop(), &out) }()
	// The sidecar opens its session with the cluster: a server span.
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), `"Name":"POST /v1/sessions"`) {
		require.True(t, time.Now().Before(deadline), "no session span printed:\n%s", out.String())
		time.Sleep(20 * time.Millisecond)
	}
	require.Contains(t, out.String(), `"Value":"fencepost-server"`, "the cluster's spans are service fencepost-server")
	cancel()
	require.NoError(t, <-done)
}
