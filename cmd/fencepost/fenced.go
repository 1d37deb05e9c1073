package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/config"
	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/pki"
	"github.com/fencepost/fencepost/fence/refsvc"
)

const fencedUsage = `Usage: fencepost fenced [flags]

Runs the reference fenced service: a downstream that accepts a write only
with a current X-Fencing-Token (rejecting a stale epoch atomically with the
write) and replays the first result of a repeated Idempotency-Key. It keeps
an append-only log of accepted writes with their epochs.

Routes:
  POST /v1/tasks/{task}/writes   fenced write (any body)
  GET  /v1/tasks/{task}          max epoch and entries of a task
  GET  /v1/log                   every accepted write
  GET  /healthz, /metrics

Examples:
  fencepost fenced --addr 127.0.0.1:7490
  fencepost fenced --keys-from http://127.0.0.1:7400 --require-signature
`

func init() {
	register(&command{name: "fenced", summary: "run the reference fenced downstream service", usage: fencedUsage, run: runFenced})
}

func runFenced(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("fenced")
	flags := config.BindFlags(fs, config.RoleFenced)
	if code, ok := parseFlags(fs, fencedUsage, args, stdout, stderr); !ok {
		return code
	}
	cfg, code := loadRole[*config.Fenced](config.RoleFenced, flags, "fenced", stderr)
	if code != exitOK {
		return code
	}
	log, err := newLogger(cfg.Log, stderr)
	if err != nil {
		return reportError(stderr, "fenced", err)
	}
	defer func() { _ = log.Sync() }()
	srv, err := startFenced(ctx, cfg, log, newRegistry())
	if err != nil {
		return reportError(stderr, "fenced", err)
	}
	<-ctx.Done()
	if err := srv.Close(); err != nil {
		return reportError(stderr, "fenced", err)
	}
	log.Info("stopped")
	return exitOK
}

// startFenced builds and starts the reference service, fetching the
// cluster's public keys first when keys_from is set.
func startFenced(ctx context.Context, cfg *config.Fenced, log *zap.Logger, reg *prometheus.Registry) (*refsvc.Server, error) {
	rc := refsvc.Config{Addr: cfg.Addr, Registerer: reg, Gatherer: reg}
	if cfg.KeysFrom != "" {
		keys, err := fetchKeys(ctx, cfg.KeysFrom, cfg.KeysCAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: keys_from: %w", config.ErrRuntime, err)
		}
		rc.VerifyKeys, rc.AllowUnsigned = keys, !cfg.RequireSignature
	}
	srv, err := refsvc.New(rc)
	if err != nil {
		return nil, err
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("%w: %w", config.ErrRuntime, err)
	}
	log.Info("fencepost fenced started", zap.String("addr", srv.Addr()), zap.Bool("signatures", rc.VerifyKeys != nil))
	return srv, nil
}

// fetchKeys fetches the cluster's signing keys, retrying for a while: in
// `fencepost dev` and compose the cluster may still be electing a leader.
// With caFile the keys come over HTTPS, the cluster verified against it.
func fetchKeys(ctx context.Context, endpoint, caFile string) (fence.StaticKeys, error) {
	url := endpoint
	var client *http.Client
	if caFile != "" {
		pool, err := pki.LoadPool(caFile)
		if err != nil {
			return nil, err
		}
		client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool}}}
		defer client.CloseIdleConnections()
		if !strings.Contains(url, "://") {
			url = "https://" + url
		}
	}
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	url = strings.TrimRight(url, "/") + api.PathKeys
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		keys, err := fence.FetchKeys(ctx, client, url)
		if err == nil && len(keys) > 0 {
			return keys, nil
		}
		if err == nil {
			err = fmt.Errorf("%s lists no keys yet", url)
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(250 * time.Millisecond):
		}
	}
}
