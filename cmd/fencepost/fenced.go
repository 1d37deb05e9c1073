package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
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
  GET  /v1/log                   every accepted write (only with serve_log)
  GET  /healthz, /metrics

Examples:
  fencepost fenced --addr 127.0.0.1:7490
  fencepost fenced --keys-from http://127.0.0.1:7400   # signatures required
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
	traces, stopTraces, err := startTracing(cfg.Tracing, stdout, log)
	if err != nil {
		return reportError(stderr, "fenced", startError(err))
	}
	defer stopTraces()
	srv, err := startFenced(ctx, cfg, log, newRegistry(), traces.Provider("fenced"))
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
func startFenced(ctx context.Context, cfg *config.Fenced, log *zap.Logger, reg *prometheus.Registry, tp trace.TracerProvider) (*refsvc.Server, error) {
	rc := refsvc.Config{Addr: cfg.Addr, Registerer: reg, Gatherer: reg, ServeLog: cfg.ServeLog, TracerProvider: tp,
		MemStore: fence.MemStoreConfig{MaxTasks: cfg.MaxTasks, MaxTasksPerHolder: cfg.MaxTasksPerHolder}}
	src, err := cfg.TLS.Source("tls")
	if err != nil {
		return nil, startError(err)
	}
	if src != nil {
		// Callers are sidecars and anyone they stand for: nobody is asked
		// for a certificate; the token is the credential.
		rc.TLS = src.ServerConfig(tls.NoClientCert)
	}
	if cfg.KeysFrom != "" {
		client, err := keysClient(cfg.KeysCAFile)
		if err != nil {
			return nil, startError(err)
		}
		initial, err := fetchKeys(ctx, client, cfg.KeysFrom, log, keysWait)
		if err != nil {
			return nil, startError(err)
		}
		url := keysURL(cfg.KeysFrom, client != nil)
		keys := fence.NewRefreshingKeys(initial, func(ctx context.Context) (fence.StaticKeys, error) {
			return fence.FetchKeys(ctx, client, url)
		}, fence.DefaultKeyRefetchInterval, nil)
		// Keys configured means signatures required, unless explicitly
		// waived: an unsigned forged epoch would lock owners out.
		rc.VerifyKeys, rc.AllowUnsigned = keys, cfg.AllowUnsigned
	}
	srv, err := refsvc.New(rc)
	if err != nil {
		return nil, startError(err)
	}
	if err := srv.Start(); err != nil {
		return nil, startError(err)
	}
	log.Info("fencepost fenced started", zap.String("addr", srv.Addr()), zap.Bool("tls", rc.TLS != nil),
		zap.Bool("signatures", rc.VerifyKeys != nil), zap.Bool("unsigned_accepted", rc.VerifyKeys == nil || rc.AllowUnsigned),
		zap.Bool("log_served", rc.ServeLog))
	if rc.VerifyKeys == nil {
		log.Warn("no keys_from: unsigned tokens are accepted, so anyone who can reach this port can lock a task's owner out with a forged epoch")
	}
	if rc.TLS == nil && !config.LoopbackAddr(srv.Addr()) {
		log.Warn("plain HTTP beyond loopback: tokens, signatures and bodies cross the network in the clear; set tls.cert_file (and tls.ca_file, tls.key_file) to serve HTTPS",
			zap.String("addr", srv.Addr()))
	}
	return srv, nil
}

// keysClient is the HTTP client fenced fetches keys with: the default one
// without keys_ca_file (plain HTTP, loopback only), or one that verifies the
// cluster against the CA (keys_ca_file).
func keysClient(caFile string) (*http.Client, error) {
	if caFile == "" {
		return nil, nil
	}
	pool, err := pki.LoadPool(caFile)
	if err != nil {
		return nil, fmt.Errorf("keys_ca_file: %w", err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool}}
	return &http.Client{Transport: tr}, nil
}

// keysURL is the key document's URL on a cluster endpoint; an endpoint
// without a scheme is https when a CA verifies it (tls), http otherwise.
func keysURL(endpoint string, tls bool) string {
	url := endpoint
	if !strings.Contains(url, "://") {
		if tls {
			url = "https://" + url
		} else {
			url = "http://" + url
		}
	}
	return strings.TrimRight(url, "/") + api.PathKeys
}

// keysWait bounds how long fenced waits for keys_from at start: long enough
// for a cluster started beside it (compose, dev) to elect a leader, short
// enough that a wrong address fails where a person is still watching.
const keysWait = 30 * time.Second

// keysAttemptTimeout bounds one attempt, so a cluster address that drops
// packets still gets a log line every few seconds.
const keysAttemptTimeout = 5 * time.Second

// fetchKeys fetches the cluster's signing keys, retrying with backoff and a
// log line per failed attempt for up to wait. Until it has them fenced does
// not listen: a service that verifies signatures must not accept a write it
// cannot check. After wait it fails with one line naming keys_from, the
// attempts and the last cause. client is keysClient's.
func fetchKeys(ctx context.Context, client *http.Client, endpoint string, log *zap.Logger, wait time.Duration) (fence.StaticKeys, error) {
	url := keysURL(endpoint, client != nil)
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	delay := 250 * time.Millisecond
	for attempt := 1; ; attempt++ {
		actx, acancel := context.WithTimeout(ctx, keysAttemptTimeout)
		keys, err := fence.FetchKeys(actx, client, url)
		acancel()
		if err == nil && len(keys) > 0 {
			if attempt > 1 {
				log.Info("signing keys fetched", zap.String("keys_from", url), zap.Int("attempt", attempt))
			}
			return keys, nil
		}
		if errors.Is(err, fence.ErrInvalidConfig) {
			// A malformed URL or a reply that is not a key document:
			// waiting will not fix it.
			return nil, fmt.Errorf("keys_from %s: %w", url, err)
		}
		if err == nil {
			err = errors.New("the cluster lists no keys yet")
		}
		log.Warn("waiting for the cluster's signing keys; not listening until they arrive",
			zap.String("keys_from", url), zap.Int("attempt", attempt), zap.Duration("retry_in", delay), zap.Error(err))
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("keys_from %s: stopped while waiting for signing keys: %w", url, err)
		case <-deadline.C:
			return nil, fmt.Errorf("keys_from %s: no signing keys after %s (%d attempts; fenced does not listen without them): %w",
				url, wait, attempt, err)
		case <-time.After(delay):
		}
		delay = min(2*delay, 4*time.Second)
	}
}
