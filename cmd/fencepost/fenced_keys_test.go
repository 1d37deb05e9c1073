package main

import (
	"crypto/ed25519"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/config"
	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/fence/api"
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

	srv, err := startFenced(t.Context(), &config.Fenced{Addr: "127.0.0.1:0", KeysFrom: cluster.URL, KeysCAFile: caFile}, zap.NewNop(), newRegistry())
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
