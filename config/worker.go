package config

import (
	"slices"

	"github.com/fencepost/fencepost/proxy/workertie"
)

// Worker ties the worker's lifetime to its leases (DESIGN.md 17): how
// `fencepost run` treats its child, and the health probe of a worker the
// sidecar neither parents nor sees attached. Every default comes from
// package proxy/workertie, which owns it.
type Worker struct {
	// OnLost is what a lost lease does to a child of fencepost run.
	OnLost string `yaml:"on_lost" doc:"fencepost run: what a lost lease does to the child: terminate (SIGTERM, then SIGKILL after kill_grace) or none"`
	// KillGrace is the time between SIGTERM and SIGKILL.
	KillGrace Duration `yaml:"kill_grace" doc:"fencepost run: time between the child's SIGTERM and SIGKILL"`
	// Restart is never or on-failure.
	Restart string `yaml:"restart" doc:"fencepost run: never, or on-failure (start a crashed child again under a new grant; a lost lease ends the run)"`
	// RestartBackoff and RestartMax bound the wait before a restart.
	RestartBackoff Duration `yaml:"restart_backoff" doc:"fencepost run: first wait before a restart; doubles per crash up to restart_max"`
	RestartMax     Duration `yaml:"restart_max" doc:"fencepost run: longest wait before a restart"`
	// OnSuccess is how a child's exit 0 ends its leases.
	OnSuccess string `yaml:"on_success" doc:"fencepost run: complete or give_back the leases of a child that exited 0"`
	// Health probes the worker.
	// ProgressCalls says which proxied calls count as progress.
	ProgressCalls string       `yaml:"progress_calls" doc:"which proxied calls mark progress toward the profile's progress_timeout, besides checkpoints and POST /v1/progress: none, writes or all"`
	Health        WorkerHealth `yaml:"health"`
}

// WorkerHealth is the probe of a worker (Kubernetes' case: a worker in
// another container): after threshold failures in a row its leases are
// given back, reason worker_unhealthy.
type WorkerHealth struct {
	URL         string   `yaml:"url" doc:"probe: GET this loopback URL; 200-399 is healthy (empty: no URL probe)"`
	Command     []string `yaml:"command" doc:"probe: run this command (argv, comma-separated); exit 0 is healthy"`
	Interval    Duration `yaml:"interval" doc:"probe: time between probes"`
	Timeout     Duration `yaml:"timeout" doc:"probe: time one probe may take"`
	Threshold   int      `yaml:"threshold" doc:"probe: failures in a row that make the worker unhealthy"`
	StartPeriod Duration `yaml:"start_period" doc:"probe: failures before the first success do not count for this long"`
}

// defaultWorker returns the worker tie's defaults.
func defaultWorker() Worker {
	d := workertie.Config{}.WithDefaults()
	return Worker{
		OnLost: string(d.OnLost), KillGrace: Duration(d.KillGrace), Restart: string(d.Restart),
		RestartBackoff: Duration(d.RestartBackoff), RestartMax: Duration(d.RestartMax), OnSuccess: string(d.OnSuccess),
		ProgressCalls: string(d.ProgressCalls),
		Health: WorkerHealth{Interval: Duration(d.Health.Interval), Timeout: Duration(d.Health.Timeout),
			Threshold: d.Health.Threshold, StartPeriod: Duration(d.Health.StartPeriod)},
	}
}

// Tie returns the configuration as package workertie takes it.
func (w Worker) Tie() workertie.Config {
	return workertie.Config{
		OnLost: workertie.OnLost(w.OnLost), KillGrace: w.KillGrace.Std(), Restart: workertie.Restart(w.Restart),
		RestartBackoff: w.RestartBackoff.Std(), RestartMax: w.RestartMax.Std(), OnSuccess: workertie.OnSuccess(w.OnSuccess),
		ProgressCalls: workertie.ProgressCalls(w.ProgressCalls),
		Health: workertie.Health{URL: w.Health.URL, Command: slices.Clone(w.Health.Command), Interval: w.Health.Interval.Std(),
			Timeout: w.Health.Timeout.Std(), Threshold: w.Health.Threshold, StartPeriod: w.Health.StartPeriod.Std()},
	}
}

// validate words workertie's rules for the file's keys.
func (w Worker) validate(p *problems) {
	oneOf := func(key, v string, allowed ...string) {
		if !slices.Contains(allowed, v) {
			p.invalid(key, "must be one of %s (got %q)", quoteList(allowed), v)
		}
	}
	oneOf("worker.on_lost", w.OnLost, string(workertie.OnLostTerminate), string(workertie.OnLostNone))
	oneOf("worker.restart", w.Restart, string(workertie.RestartNever), string(workertie.RestartOnFailure))
	oneOf("worker.on_success", w.OnSuccess, string(workertie.OnSuccessComplete), string(workertie.OnSuccessGiveBack))
	oneOf("worker.progress_calls", w.ProgressCalls, string(workertie.ProgressNone), string(workertie.ProgressWrites), string(workertie.ProgressAll))
	if w.KillGrace < 0 {
		p.invalid("worker.kill_grace", "must be >= 0 (got %s)", w.KillGrace)
	}
	checkPositive(p, "worker.restart_backoff", w.RestartBackoff)
	if w.RestartMax < w.RestartBackoff {
		p.invalid("worker.restart_max", "must be >= worker.restart_backoff (%s, got %s)", w.RestartBackoff, w.RestartMax)
	}
	h := w.Health
	if h.URL != "" && len(h.Command) > 0 {
		p.invalid("worker.health.command", "set worker.health.url or worker.health.command, not both")
	}
	checkPositive(p, "worker.health.interval", h.Interval)
	checkPositive(p, "worker.health.timeout", h.Timeout)
	if h.Timeout > h.Interval {
		p.invalid("worker.health.timeout", "must be <= worker.health.interval (%s, got %s)", h.Interval, h.Timeout)
	}
	if h.Threshold < 1 {
		p.invalid("worker.health.threshold", "must be >= 1 (got %d)", h.Threshold)
	}
	if h.StartPeriod < 0 {
		p.invalid("worker.health.start_period", "must be >= 0 (got %s)", h.StartPeriod)
	}
	if h.URL != "" {
		if err := (workertie.Config{Health: workertie.Health{URL: h.URL}}).Validate(); err != nil {
			p.invalid("worker.health.url", "must be an http:// or https:// URL on a loopback address or localhost, the worker beside the sidecar (got %q)", h.URL)
		}
	}
}
