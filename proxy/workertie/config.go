package workertie

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"
)

// ErrConfig reports an invalid Config; the error names the field and rule.
var ErrConfig = errors.New("workertie: invalid configuration")

// OnLost says what happens to a parented worker when its lease is lost.
type OnLost string

// OnLost values.
const (
	// OnLostTerminate sends the child SIGTERM, then SIGKILL after
	// Config.KillGrace: nothing runs on under a dead epoch.
	OnLostTerminate OnLost = "terminate"
	// OnLostNone leaves the child running; its writes are blocked by the
	// sidecar and fenced downstream.
	OnLostNone OnLost = "none"
)

// Restart says whether a parented worker that exited is started again.
type Restart string

// Restart values.
const (
	// RestartNever: the sidecar's run ends with the child.
	RestartNever Restart = "never"
	// RestartOnFailure: a child that crashed (exited non-zero or by a
	// signal while its lease was held) is started again after a backoff,
	// under a new grant (a higher epoch). A lost lease ends the run: a
	// revoke must stick.
	RestartOnFailure Restart = "on-failure"
)

// OnSuccess says how the leases of a child that exited 0 end.
type OnSuccess string

// OnSuccess values.
const (
	// OnSuccessComplete completes every lease still held: exit 0 means
	// the task is done.
	OnSuccessComplete OnSuccess = "complete"
	// OnSuccessGiveBack gives them back (reason worker_exited), for a
	// worker whose exit 0 does not mean its task is done.
	OnSuccessGiveBack OnSuccess = "give_back"
)

// ProgressCalls says which proxied calls count as progress toward the
// profile's progress deadline, besides checkpoints and POST /v1/progress.
type ProgressCalls string

// ProgressCalls values.
const (
	// ProgressNone: only checkpoints and explicit marks count. A worker
	// stuck in a loop that keeps calling an API is then still a stalled
	// run, which is what the deadline is for.
	ProgressNone ProgressCalls = "none"
	// ProgressWrites: every write the sidecar forwards counts.
	ProgressWrites ProgressCalls = "writes"
	// ProgressAll: every call the sidecar forwards counts.
	ProgressAll ProgressCalls = "all"
)

// Defaults, applied to zero fields by WithDefaults. The health defaults
// detect a dead worker within ~3 s: two failed probes a second apart, each
// given 500 ms (interval × threshold + timeout = 2.5 s).
const (
	DefaultOnLost         = OnLostTerminate
	DefaultKillGrace      = 10 * time.Second
	DefaultRestart        = RestartNever
	DefaultRestartBackoff = time.Second
	DefaultRestartMax     = 30 * time.Second
	DefaultOnSuccess      = OnSuccessComplete
	DefaultProgressCalls  = ProgressNone

	DefaultHealthInterval    = time.Second
	DefaultHealthTimeout     = 500 * time.Millisecond
	DefaultHealthThreshold   = 2
	DefaultHealthStartPeriod = 30 * time.Second
)

// Config configures the ties. The zero value is usable: every field has
// a default, and no health probe runs unless Health names a URL or a
// command.
type Config struct {
	// OnLost: what a lost lease does to a parented child.
	OnLost OnLost
	// KillGrace is how long a child has between SIGTERM and SIGKILL.
	KillGrace time.Duration
	// Restart: whether a parented child is started again.
	Restart Restart
	// RestartBackoff is the first wait before a restart; it doubles on
	// each consecutive failure, up to RestartMax, and starts again after
	// a child that ran longer than RestartMax.
	RestartBackoff time.Duration
	RestartMax     time.Duration
	// OnSuccess: how the leases of a child that exited 0 end.
	OnSuccess OnSuccess
	// ProgressCalls: which proxied calls mark progress (the mark rides
	// the next heartbeat, as POST /v1/progress does; no raft write).
	ProgressCalls ProgressCalls
	// Health is the probe of a worker the sidecar neither parents nor
	// sees attached.
	Health Health
}

// Health configures the probe. Exactly one of URL and Command may be set;
// neither means no probe.
type Health struct {
	// URL is probed with GET; 200-399 is healthy. Its host must be a
	// loopback address or localhost: the probe asks the worker beside the
	// sidecar, nothing else.
	URL string
	// Command is run (argv, no shell); exit 0 is healthy.
	Command []string
	// Interval is the time between probes; Timeout bounds each one.
	Interval time.Duration
	Timeout  time.Duration
	// Threshold is the number of failures in a row that make the worker
	// unhealthy.
	Threshold int
	// StartPeriod is how long failures are not counted while the worker
	// has not passed a probe yet (it is starting); after it, or after a
	// first success, every failure counts.
	StartPeriod time.Duration
}

// Enabled reports whether a probe is configured.
func (h Health) Enabled() bool { return h.URL != "" || len(h.Command) > 0 }

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	setD := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.OnLost == "" {
		c.OnLost = DefaultOnLost
	}
	if c.Restart == "" {
		c.Restart = DefaultRestart
	}
	if c.OnSuccess == "" {
		c.OnSuccess = DefaultOnSuccess
	}
	if c.ProgressCalls == "" {
		c.ProgressCalls = DefaultProgressCalls
	}
	setD(&c.KillGrace, DefaultKillGrace)
	setD(&c.RestartBackoff, DefaultRestartBackoff)
	setD(&c.RestartMax, DefaultRestartMax)
	setD(&c.Health.Interval, DefaultHealthInterval)
	setD(&c.Health.Timeout, DefaultHealthTimeout)
	setD(&c.Health.StartPeriod, DefaultHealthStartPeriod)
	if c.Health.Threshold == 0 {
		c.Health.Threshold = DefaultHealthThreshold
	}
	return c
}

// Validate reports the first problem with c (after defaults), naming the
// field and the rule.
func (c Config) Validate() error {
	c = c.WithDefaults()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
	}
	switch {
	case c.OnLost != OnLostTerminate && c.OnLost != OnLostNone:
		return bad("OnLost must be %q or %q, not %q", OnLostTerminate, OnLostNone, c.OnLost)
	case c.Restart != RestartNever && c.Restart != RestartOnFailure:
		return bad("Restart must be %q or %q, not %q", RestartNever, RestartOnFailure, c.Restart)
	case c.OnSuccess != OnSuccessComplete && c.OnSuccess != OnSuccessGiveBack:
		return bad("OnSuccess must be %q or %q, not %q", OnSuccessComplete, OnSuccessGiveBack, c.OnSuccess)
	case c.ProgressCalls != ProgressNone && c.ProgressCalls != ProgressWrites && c.ProgressCalls != ProgressAll:
		return bad("ProgressCalls must be %q, %q or %q, not %q", ProgressNone, ProgressWrites, ProgressAll, c.ProgressCalls)
	case c.KillGrace < 0:
		return bad("KillGrace must not be negative")
	case c.RestartBackoff < 0 || c.RestartMax < c.RestartBackoff:
		return bad("RestartBackoff %s and RestartMax %s must satisfy 0 <= RestartBackoff <= RestartMax", c.RestartBackoff, c.RestartMax)
	}
	return c.Health.validate(bad)
}

func (h Health) validate(bad func(string, ...any) error) error {
	switch {
	case h.URL != "" && len(h.Command) > 0:
		return bad("Health: set URL or Command, not both")
	case h.Interval <= 0 || h.Timeout <= 0:
		return bad("Health: Interval and Timeout must be positive")
	case h.Timeout > h.Interval:
		return bad("Health: Timeout %s must be at most Interval %s", h.Timeout, h.Interval)
	case h.Threshold < 1:
		return bad("Health: Threshold must be at least 1")
	case h.StartPeriod < 0:
		return bad("Health: StartPeriod must not be negative")
	case len(h.Command) > 0 && h.Command[0] == "":
		return bad("Health: Command needs a program")
	}
	if h.URL == "" {
		return nil
	}
	u, err := url.Parse(h.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return bad("Health: URL %q must be an http:// or https:// URL", h.URL)
	}
	if !loopbackHost(u.Hostname()) {
		return bad("Health: URL %q must name a loopback address or localhost (the worker beside the sidecar)", h.URL)
	}
	return nil
}

// loopbackHost reports whether host is localhost or a loopback IP.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
