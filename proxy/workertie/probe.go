package workertie

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"time"

	"go.uber.org/zap"
)

// Probe checks a worker the sidecar neither parents nor sees attached
// (DESIGN.md 17 "probed"). Threshold failures in a row make the worker
// unhealthy: Run calls Unhealthy once (the wiring gives the leases back
// with reason worker_unhealthy); a later success calls Healthy once.
type Probe struct {
	// Health is the probe's configuration (defaults applied by Run).
	Health Health
	// Unhealthy and Healthy are told each change of verdict.
	Unhealthy func(cause error)
	Healthy   func()
	// Log receives the verdicts; nil discards them.
	Log *zap.Logger
	// Client makes URL probes; nil is a client that never uses a proxy.
	Client *http.Client
}

// Run probes every interval until ctx ends. It returns at once when no
// probe is configured.
func (p *Probe) Run(ctx context.Context) {
	h := (Config{Health: p.Health}).WithDefaults().Health
	if !h.Enabled() {
		return
	}
	log := p.Log
	if log == nil {
		log = zap.NewNop()
	}
	client := p.Client
	if client == nil {
		// The worker's own proxy variables may be set in the sidecar's
		// environment too: the probe goes straight to the worker.
		client = &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	}
	st := newVerdict(h, time.Now())
	t := time.NewTicker(h.Interval)
	defer t.Stop()
	for {
		err := p.check(ctx, h, client)
		if ctx.Err() != nil {
			return
		}
		switch st.observe(err == nil, time.Now()) {
		case turnedUnhealthy:
			log.Warn("worker unhealthy", zap.Int("failures", st.fails), zap.Error(err))
			if p.Unhealthy != nil && !DeathIgnored {
				p.Unhealthy(err)
			}
		case turnedHealthy:
			log.Info("worker healthy again")
			if p.Healthy != nil {
				p.Healthy()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// check runs one probe within the timeout.
func (p *Probe) check(ctx context.Context, h Health, client *http.Client) error {
	ctx, cancel := context.WithTimeout(ctx, h.Timeout)
	defer cancel()
	if len(h.Command) > 0 {
		cmd := exec.CommandContext(ctx, h.Command[0], h.Command[1:]...)
		cmd.WaitDelay = h.Timeout
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("health command: %w", err)
		}
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.URL, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("health URL: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 399 {
		return fmt.Errorf("health URL: status %d", resp.StatusCode)
	}
	return nil
}

// transition is a change of verdict.
type transition int

const (
	unchanged transition = iota
	turnedUnhealthy
	turnedHealthy
)

// verdict is the probe's pure state: consecutive failures and whether the
// worker is judged unhealthy. Failures before the first success count
// only once the start period is over.
type verdict struct {
	h         Health
	start     time.Time
	passed    bool
	fails     int
	unhealthy bool
}

func newVerdict(h Health, start time.Time) *verdict { return &verdict{h: h, start: start} }

// observe records one probe result at now and reports the change.
func (v *verdict) observe(ok bool, now time.Time) transition {
	if ok {
		v.passed, v.fails = true, 0
		if v.unhealthy {
			v.unhealthy = false
			return turnedHealthy
		}
		return unchanged
	}
	if !v.passed && now.Sub(v.start) < v.h.StartPeriod {
		return unchanged // still starting
	}
	v.fails++
	if !v.unhealthy && v.fails >= v.h.Threshold {
		v.unhealthy = true
		return turnedUnhealthy
	}
	return unchanged
}
