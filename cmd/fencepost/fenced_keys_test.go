package main

import (
	"crypto/ed25519"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/config"
	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/pki"
	"github.com/fencepost/fencepost/fence/pki/pkitest"
)

// TestFencedKeysOverTLS: fenced fetches the keys from an https cluster it
// verifies with keys_ca_file, requires signatures by default, and fetches
// again when a write is signed by a key it has not seen (a rotation).
func TestFencedKeysOverTLS(t *testing.T) {
	old := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	rotated := ed25519.NewKeyFromSeed(append(make([]byte, ed25519.SeedSize-1), 7))
	var served atomic.Value
	served.Store(fence.NewKeysDocument(old.Public().(ed25519.PublicKey)))
	cluster := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, api.PathKeys, r.URL.Path)
		_ = json.NewEncoder(w).Encode(served.Load())
	}))
	defer cluster.Close()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cluster.Certificate().Raw}), 0o600))

	_, err := fence.FetchKeys(t.Context(), nil, keysURL(cluster.URL, true))
	require.Error(t, err, "without the cluster CA the https keys_from is not trusted")

	srv, err := startFenced(t.Context(), &config.Fenced{Addr: "127.0.0.1:0", KeysFrom: cluster.URL, KeysCAFile: caFile}, zap.NewNop(), newRegistry(), nil)
	require.NoError(t, err)
	defer func() { _ = srv.Close() }()
	write := func(task string, epoch uint64, sig string) int {
		req, err := http.NewRequest(http.MethodPost, "http://"+srv.Addr()+"/v1/tasks/"+task+"/writes", nil)
		require.NoError(t, err)
		req.Header.Set(fence.HeaderToken, fence.FormatEpoch(epoch))
		req.Header.Set(fence.HeaderTask, task)
		req.Header.Set(fence.HeaderHolder, "w")
		if sig != "" {
			req.Header.Set(fence.HeaderSignature, sig)
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		return resp.StatusCode
	}
	require.Equal(t, http.StatusForbidden, write("t", 1<<64-1, ""), "unsigned is refused by default")
	require.Equal(t, http.StatusCreated, write("t", 3, fence.Sign(old, "t", 3, "w")))
	served.Store(fence.NewKeysDocument(old.Public().(ed25519.PublicKey), rotated.Public().(ed25519.PublicKey)))
	require.Equal(t, http.StatusCreated, write("t", 4, fence.Sign(rotated, "t", 4, "w")), "a rotated key is fetched on first sight")
}

// TestFencedServesHTTPS: with tls.* set, fenced serves HTTPS under a
// service certificate from the cluster CA; a client verifying against that
// CA gets its write through, and plain HTTP to the port gets nothing.
func TestFencedServesHTTPS(t *testing.T) {
	kit := pkitest.New(t, "cluster")
	files := kit.Files(pki.RoleService, "fenced", 24*time.Hour)
	cfg := config.DefaultFenced()
	cfg.Addr, cfg.TLS = "127.0.0.1:0", config.CertFiles{CAFile: files.CA, CertFile: files.Cert, KeyFile: files.Key}
	require.NoError(t, cfg.Validate())
	srv, err := startFenced(t.Context(), cfg, zap.NewNop(), newRegistry(), nil)
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
