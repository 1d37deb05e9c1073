package main

import (
	"crypto/tls"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/config"
	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/fence/pki"
	"github.com/fencepost/fencepost/fence/pki/pkitest"
)

// TestFencedServesHTTPS: with tls.* set, fenced serves HTTPS under a
// service certificate from the cluster CA; a client verifying against that
// CA gets its write through, and plain HTTP to the port gets nothing.
func TestFencedServesHTTPS(t *testing.T) {
	kit := pkitest.New(t, "cluster")
	files := kit.Files(pki.RoleService, "fenced", 24*time.Hour)
	cfg := config.DefaultFenced()
	cfg.Addr, cfg.TLS = "127.0.0.1:0", config.CertFiles{CAFile: files.CA, CertFile: files.Cert, KeyFile: files.Key}
	require.NoError(t, cfg.Validate())
	srv, err := startFenced(t.Context(), cfg, zap.NewNop(), newRegistry())
	require.NoError(t, err)
	defer func() { _ = srv.Close() }()

	pool, err := pki.LoadPool(files.CA)
	require.NoError(t, err)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool, ServerName: "fenced"}}}
	req, err := http.NewRequest(http.MethodPost, "https://"+srv.Addr()+"/v1/tasks/t/writes", strings.NewReader("{}"))
	require.NoError(t, err)
	req.Header.Set(fence.HeaderToken, fence.FormatEpoch(3))
	req.Header.Set(fence.HeaderTask, "t")
	req.Header.Set(fence.HeaderHolder, "w")
	resp, err := client.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	plain := &http.Client{Timeout: 5 * time.Second}
	if resp, err := plain.Get("http://" + srv.Addr() + "/healthz"); err == nil {
		_ = resp.Body.Close()
		t.Fatalf("plain HTTP to the HTTPS port answered %d", resp.StatusCode)
	}
}

// TestFencedTLSNeedsAllThreeFiles: one TLS file alone is a config error
// naming the missing keys.
func TestFencedTLSNeedsAllThreeFiles(t *testing.T) {
	cfg := config.DefaultFenced()
	cfg.TLS.CertFile = "fenced.pem"
	err := cfg.Validate()
	require.ErrorIs(t, err, config.ErrInvalid)
	require.ErrorContains(t, err, "tls.ca_file: must be set with tls.ca_file, tls.cert_file and tls.key_file")
	require.ErrorContains(t, err, "tls.key_file")
}
