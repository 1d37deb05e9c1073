package config

import "strings"

// Fenced configures the reference fenced downstream service (fencepost
// fenced): a small HTTP service that accepts writes only with a current
// fencing token, used by the demo and the tests.
type Fenced struct {
	// Addr is where the service listens.
	Addr string `yaml:"addr" doc:"listen address"`
	// KeysFrom is a cluster endpoint to fetch token-signing public keys
	// from; empty means signatures are not checked. With keys, every token
	// must carry a valid signature unless AllowUnsigned says otherwise.
	KeysFrom string `yaml:"keys_from" doc:"cluster endpoint to fetch signing public keys from"`
	// KeysCAFile is the cluster CA: keys are then fetched over HTTPS and
	// the cluster verified against it. Empty: plain HTTP, allowed only for
	// a keys_from on loopback.
	KeysCAFile string `yaml:"keys_ca_file" doc:"cluster CA certificate: fetch keys over HTTPS, verifying the cluster"`
	// RequireSignature rejects tokens without a valid signature. It is what
	// keys_from implies already; setting it without keys_from is an error.
	RequireSignature bool `yaml:"require_signature" doc:"reject tokens without a valid signature (the default with keys_from; needs keys_from)"`
	// AllowUnsigned accepts tokens without a signature even with keys: an
	// unsigned epoch 2^64-1 then locks a task's real owner out for good.
	AllowUnsigned bool `yaml:"allow_unsigned" doc:"accept unsigned tokens although keys_from is set (unsafe: a forged epoch locks the owner out)"`
	// ServeLog serves GET /v1/log (every accepted write: tasks, holders,
	// body digests) for demos and tests; off, it is 404.
	ServeLog bool `yaml:"serve_log" doc:"serve GET /v1/log, every accepted write (demos, tests)"`
	// MaxTasks bounds the tasks whose floor (max_seen) the in-memory store
	// keeps; a floor is never forgotten, so past it a new task is refused.
	MaxTasks int `yaml:"max_tasks" doc:"tasks whose floor the in-memory store keeps (0: fence.DefaultMaxTasks, 100000)"`
	// MaxTasksPerHolder bounds the tasks one holder (X-Fencing-Holder, a
	// signed token's worker id) may add, so one worker cannot take the
	// table.
	MaxTasksPerHolder int `yaml:"max_tasks_per_holder" doc:"tasks one holder may add (0: fence.DefaultMaxTasksPerHolder, 20000)"`
	// TLS serves HTTPS with a certificate from the cluster CA (`fencepost
	// tls cert create --service --name fenced --dns <its name>`). Off, the
	// service speaks plain HTTP, and says so at start when it listens
	// beyond loopback.
	TLS CertFiles `yaml:"tls"`
	// Tracing configures OpenTelemetry traces (off by default).
	Tracing Tracing `yaml:"tracing"`
	// Log configures logging.
	Log Log `yaml:"log"`
}

// DefaultFenced returns the fenced defaults.
func DefaultFenced() *Fenced {
	return &Fenced{Addr: "127.0.0.1:7490", Tracing: defaultTracing(), Log: defaultLog()}
}

// Role returns RoleFenced.
func (f *Fenced) Role() Role { return RoleFenced }

// fill has nothing to derive.
func (f *Fenced) fill() {}

// Validate checks every rule that does not depend on the host.
func (f *Fenced) Validate() error {
	var p problems
	checkAddr(&p, "addr", f.Addr)
	if f.KeysFrom != "" {
		checkEndpoint(&p, "keys_from", f.KeysFrom)
		switch {
		case f.KeysCAFile != "":
		case strings.HasPrefix(f.KeysFrom, "https://"):
			p.invalid("keys_ca_file", "must be set for an https:// keys_from (%q): the cluster is verified against it", f.KeysFrom)
		default:
			requireLoopbackWithoutTLS(&p, "keys_ca_file", [2]string{"keys_from", strings.TrimPrefix(f.KeysFrom, "http://")})
		}
	}
	if f.RequireSignature && f.KeysFrom == "" {
		p.invalid("require_signature", "needs keys_from: signatures are checked against the cluster's public keys")
	}
	if f.KeysCAFile != "" && f.KeysFrom == "" {
		p.invalid("keys_ca_file", "needs keys_from")
	}
	if f.AllowUnsigned && f.RequireSignature {
		p.invalid("allow_unsigned", "contradicts require_signature: true")
	}
	if f.MaxTasks < 0 {
		p.invalid("max_tasks", "must be >= 0 (0: the default)")
	}
	if f.MaxTasksPerHolder < 0 {
		p.invalid("max_tasks_per_holder", "must be >= 0 (0: the default)")
	}
	f.TLS.validate(&p, "tls")
	f.Tracing.validate(&p)
	f.Log.validate(&p)
	return p.err()
}

// CheckRuntime checks that the port is free.
func (f *Fenced) CheckRuntime() error {
	var p problems
	checkPortFree(&p, "addr", f.Addr)
	checkReadable(&p, "keys_ca_file", f.KeysCAFile)
	f.TLS.checkRuntime(&p, "tls")
	return p.err()
}
