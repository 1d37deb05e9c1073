package main

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/config"
)

func TestHealthcheck(t *testing.T) {
	// Against the real fenced service's /healthz, with a proxy variable set
	// that would break the probe if it were honoured.
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	t.Setenv("http_proxy", "http://127.0.0.1:1")
	cfg := config.DefaultFenced()
	cfg.Addr = "127.0.0.1:0"
	srv, err := startFenced(t.Context(), cfg, zap.NewNop(), newRegistry(), nil)
	require.NoError(t, err)
	defer srv.Close()
	code, out, errOut := runCLI(t, "healthcheck", "http://"+srv.Addr()+"/healthz")
	require.Equal(t, exitOK, code, errOut)
	require.Equal(t, "http://"+srv.Addr()+"/healthz: 200 OK\n", out)

	notReady := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no leader", http.StatusServiceUnavailable)
	}))
	defer notReady.Close()
	code, _, errOut = runCLI(t, "healthcheck", notReady.URL+"/readyz")
	require.Equal(t, exitRuntime, code)
	require.Equal(t, "fencepost healthcheck: "+notReady.URL+"/readyz: 503 Service Unavailable\n", errOut)

	code, _, errOut = runCLI(t, "healthcheck", "--timeout", "1s", "http://"+freeAddr(t)+"/healthz")
	require.Equal(t, exitRuntime, code)
	require.Contains(t, errOut, "connection refused")
	require.Equal(t, 1, strings.Count(errOut, "\n"))

	// https: verified against --ca, refused without it.
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer tlsSrv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw}), 0o600))
	code, _, errOut = runCLI(t, "healthcheck", "--ca", ca, tlsSrv.URL+"/healthz")
	require.Equal(t, exitOK, code, errOut)
	code, _, errOut = runCLI(t, "healthcheck", tlsSrv.URL+"/healthz")
	require.Equal(t, exitRuntime, code)
	require.Contains(t, errOut, "certificate")

	for _, args := range [][]string{{}, {"127.0.0.1:7400/readyz"}, {"a", "b"}, {"--timeout", "0s", "http://x/"},
		{"--ca", filepath.Join(t.TempDir(), "none.pem"), "https://x/"}, {"--ca", ca + "x", "https://x/"}} {
		code, _, errOut = runCLI(t, append([]string{"healthcheck"}, args...)...)
		require.Equal(t, exitUsage, code, "%v: %s", args, errOut)
		require.Equal(t, 1, strings.Count(errOut, "\n"), errOut)
	}
}
