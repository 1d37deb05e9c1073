package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/fencepost/fencepost/config"
	"github.com/fencepost/fencepost/fence"
)

// A configuration the config rules let through but a role's package refuses
// at start is still a configuration error: exit 2, as the README promises,
// one line. One case per role's start path.
func TestStartConfigErrorsExit2(t *testing.T) {
	t.Run("sidecar", func(t *testing.T) {
		code, _, errOut := runCLI(t, "sidecar", "--cluster", "127.0.0.1:1", "--proxy-addr", "127.0.0.1:0",
			"--control-addr", "127.0.0.1:0", "--limits-max-header-bytes", "100")
		require.Equal(t, exitUsage, code, errOut)
		require.Equal(t, 1, strings.Count(errOut, "\n"), errOut)
		require.Contains(t, errOut, "fencepost sidecar: ")
	})
	t.Run("server", func(t *testing.T) {
		key := filepath.Join(t.TempDir(), "key")
		require.NoError(t, os.WriteFile(key, []byte("not a key"), 0o600))
		code, _, errOut := runCLI(t, "server", "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0",
			"--raft-addr", "127.0.0.1:0", "--raft-advertise", "127.0.0.1:1", "--set", "signing.key_file="+key)
		require.Equal(t, exitUsage, code, errOut)
		require.Equal(t, "fencepost server: config: invalid value: signing.key_file: must be PEM PKCS #8, a 32-byte seed or a 64-byte key (got 9 bytes)\n", errOut)

		// A rule only the raft store knows (bypassing config's own rules).
		cfg := config.DefaultServer()
		cfg.NodeID, cfg.DataDir = "n1", t.TempDir()
		cfg.Raft.HeartbeatTimeout = config.Duration(time.Millisecond)
		bootstrap := true
		cfg.Bootstrap = &bootstrap
		_, err := nodeConfig(cfg, zap.NewNop(), prometheus.NewRegistry())
		require.Equal(t, exitUsage, exitCode(startError(err)), "%v", err)
	})
	t.Run("fenced", func(t *testing.T) {
		_, err := startFenced(t.Context(), &config.Fenced{}, zap.NewNop(), newRegistry(), nil)
		require.Error(t, err)
		require.Equal(t, exitUsage, exitCode(err), "%v", err)
		require.NotContains(t, err.Error(), "runtime check failed")
	})
	t.Run("dev", func(t *testing.T) {
		cfg := config.DefaultDev()
		cfg.DataDir = t.TempDir()
		cfg.Ports = config.DevPorts{}
		cfg.Task = "bad\x01task" // Dev.Validate refuses it; here the sidecar must.
		cfg.Log.Format = "json"
		err := serveDev(t.Context(), cfg, zap.NewNop(), &strings.Builder{})
		require.Error(t, err)
		require.Equal(t, exitUsage, exitCode(err), "%v", err)
		require.Contains(t, err.Error(), "task")
	})
	t.Run("runtime stays 1", func(t *testing.T) {
		require.Equal(t, exitRuntime, exitCode(startError(&net.OpError{Op: "listen", Err: os.ErrPermission})))
	})
}

// fenced with a keys_from nobody answers: a warning per attempt, never
// listening, then one clear line and exit 1 (issue 16, item 7).
func TestFencedUnreachableKeysFrom(t *testing.T) {
	dead := freeAddr(t)

	core, logs := observer.New(zap.InfoLevel)
	start := time.Now()
	_, err := fetchKeys(t.Context(), nil, dead, zap.New(core), 1500*time.Millisecond)
	require.Error(t, err)
	require.Equal(t, exitRuntime, exitCode(startError(err)))
	msg := err.Error()
	require.NotContains(t, msg, "\n")
	require.True(t, strings.HasPrefix(msg, "keys_from http://"+dead+"/v1/keys: no signing keys after 1.5s ("), msg)
	require.Contains(t, msg, "connection refused")
	require.Less(t, time.Since(start), 10*time.Second)
	warns := logs.FilterMessage("waiting for the cluster's signing keys; not listening until they arrive").All()
	require.GreaterOrEqual(t, len(warns), 3, "one line per attempt: %v", logs.All())
	require.Contains(t, msg, "("+strconv.Itoa(len(warns))+" attempts;", "the message counts the attempts logged")

	// Through the command: exit 1, one line, nothing listening meanwhile.
	addr := freeAddr(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	go func() {
		defer cancel()
		for ctx.Err() == nil {
			if c, err := net.Dial("tcp", addr); err == nil {
				_ = c.Close()
				t.Errorf("fenced listens on %s before it has keys", addr)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	var out, errOut strings.Builder
	code := run(ctx, []string{"fenced", "--addr", addr, "--keys-from", dead, "--require-signature", "--log-format", "json"}, &out, &errOut)
	require.Equal(t, exitRuntime, code)
	lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
	require.Contains(t, lines[len(lines)-1], "fencepost fenced: keys_from http://"+dead+"/v1/keys: stopped while waiting for signing keys")
}

// Keys that arrive a little late are picked up by a retry.
func TestFencedKeysArriveLate(t *testing.T) {
	addr := freeAddr(t)
	pub, _, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	doc, err := json.Marshal(fence.NewKeysDocument(pub))
	require.NoError(t, err)
	go func() {
		time.Sleep(700 * time.Millisecond)
		srv := &http.Server{Addr: addr, ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(doc)
		})}
		go func() { <-t.Context().Done(); _ = srv.Close() }()
		_ = srv.ListenAndServe()
	}()
	core, logs := observer.New(zap.InfoLevel)
	keys, err := fetchKeys(t.Context(), nil, addr, zap.New(core), 20*time.Second)
	require.NoError(t, err, "%v", logs.All())
	require.NotEmpty(t, keys)
	require.NotEmpty(t, logs.FilterMessage("signing keys fetched").All())
}
