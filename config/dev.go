package config

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"

	"github.com/fencepost/fencepost/config/tracing"
)

// Dev configures the embedded single-process stack (fencepost dev): a
// one-node cluster, a sidecar and the fenced service, all on loopback.
type Dev struct {
	// DataDir holds the embedded node's raft data.
	DataDir string `yaml:"data_dir" doc:"data directory of the embedded node"`
	// Ports are the loopback ports of the three parts.
	Ports DevPorts `yaml:"ports"`
	// Task is the task the embedded sidecar holds (one-task mode), so a
	// fenced call works right away.
	Task string `yaml:"task" doc:"task the embedded sidecar creates and holds"`
	// SignatureHosts are host:port targets of your own (a service behind
	// your own validator) that get the token's signature too, besides the
	// embedded fenced service, which always does.
	SignatureHosts []string `yaml:"signature_hosts" doc:"more host:port targets that get the token signature (the embedded fenced service always does)"`
	// TraceConsole prints every span to the console: the one flag
	// (--trace-console) that says tracing.exporter=console.
	TraceConsole bool `yaml:"trace_console" doc:"print every span as a JSON line on stdout (sets tracing.exporter=console)"`
	// ConsoleTraceURL is the console's trace UI URL template: a timeline
	// entry with a trace id links there (config.CheckTraceURL).
	ConsoleTraceURL string `yaml:"console_trace_url" doc:"trace UI URL with {trace_id}, e.g. http://127.0.0.1:16686/trace/{trace_id}: the console links trace ids there"`
	// Tracing configures OpenTelemetry traces (off by default) for every
	// part; each part is its own service (fencepost-server, -sidecar, -fenced).
	Tracing Tracing `yaml:"tracing"`
	// Log configures logging for every part.
	Log Log `yaml:"log"`
}

// DevPorts are the loopback ports fencepost dev listens on. Port 0 picks a
// free port; the wiring then has to patch the addresses it hands to the
// other parts (see Dev.Server).
type DevPorts struct {
	// HTTP is the cluster HTTP API port.
	HTTP int `yaml:"http" doc:"cluster HTTP API port"`
	// Raft is the raft transport port.
	Raft int `yaml:"raft" doc:"raft transport port"`
	// Proxy is the sidecar's HTTP proxy port.
	Proxy int `yaml:"proxy" doc:"sidecar HTTP proxy port"`
	// Control is the sidecar's control API port.
	Control int `yaml:"control" doc:"sidecar control API port"`
	// Fenced is the fenced service's port.
	Fenced int `yaml:"fenced" doc:"fenced service port"`
	// FencedTLS serves the fenced service over HTTPS, to try interception.
	FencedTLS int `yaml:"fenced_tls" doc:"fenced service HTTPS port"`
	// Console is the operator console's port (the web UI).
	Console int `yaml:"console" doc:"operator console port"`
}

// DefaultDev returns the dev defaults.
func DefaultDev() *Dev {
	return &Dev{
		DataDir: "./fencepost-data/dev",
		Task:    "dev-task",
		Ports:   DevPorts{HTTP: 7400, Raft: 7401, Proxy: 7480, Control: 7481, Fenced: 7490, FencedTLS: 7491, Console: 7470},
		// A person reads dev logs in a terminal, so they default to console.
		Log:     Log{Level: "info", Format: "console"},
		Tracing: defaultTracing(),
	}
}

// Role returns RoleDev.
func (d *Dev) Role() Role { return RoleDev }

// fill turns trace_console into the console exporter.
func (d *Dev) fill() {
	if d.TraceConsole {
		d.Tracing.Exporter = tracing.ExporterConsole
	}
}

// ports lists the ports with their keys, in schema order.
func (d *Dev) ports() []struct {
	key  string
	port int
} {
	return []struct {
		key  string
		port int
	}{
		{"ports.http", d.Ports.HTTP}, {"ports.raft", d.Ports.Raft}, {"ports.proxy", d.Ports.Proxy},
		{"ports.control", d.Ports.Control}, {"ports.fenced", d.Ports.Fenced}, {"ports.fenced_tls", d.Ports.FencedTLS},
		{"ports.console", d.Ports.Console},
	}
}

// Validate checks the ports are in range and distinct.
func (d *Dev) Validate() error {
	var p problems
	if d.DataDir == "" {
		p.invalid("data_dir", "must not be empty")
	}
	if d.ConsoleTraceURL != "" {
		if err := CheckTraceURL(d.ConsoleTraceURL); err != nil {
			p.invalid("console_trace_url", "%v", err)
		}
	}
	if d.Task != "" {
		checkName(&p, "task", d.Task)
	}
	checkSignatureHosts(&p, d.SignatureHosts)
	used := map[int]string{}
	for _, pt := range d.ports() {
		if pt.port < 0 || pt.port > 65535 {
			p.invalid(pt.key, "must be from 0 to 65535 (got %d)", pt.port)
			continue
		}
		if other, ok := used[pt.port]; ok && pt.port != 0 {
			p.invalid(pt.key, "must differ from %s (both %d)", other, pt.port)
		}
		used[pt.port] = pt.key
	}
	d.Tracing.validate(&p)
	d.Log.validate(&p)
	return p.err()
}

// CheckRuntime checks data_dir is writable and every port is free.
func (d *Dev) CheckRuntime() error {
	var p problems
	checkWritableDir(&p, "data_dir", d.DataDir)
	for _, pt := range d.ports() {
		checkPortFree(&p, pt.key, loopback(pt.port))
	}
	return p.err()
}

// loopback returns 127.0.0.1:port.
func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// Server returns the configuration of the embedded cluster node: node id
// "dev", bootstrapping a one-node cluster in DataDir, server defaults for
// everything else. It is not validated; with port 0 the caller sets the real
// addresses first.
func (d *Dev) Server() *Server {
	s := DefaultServer()
	s.NodeID = "dev"
	s.DataDir = d.DataDir
	s.HTTPAddr = loopback(d.Ports.HTTP)
	s.RaftAddr = loopback(d.Ports.Raft)
	s.Log = d.Log
	s.fill()
	return s
}

// Sidecar returns the configuration of the embedded sidecar, pointed at the
// embedded node. It is not validated.
func (d *Dev) Sidecar() *Sidecar {
	s := DefaultSidecar()
	s.Cluster = []string{loopback(d.Ports.HTTP)}
	s.WorkerID = "dev-worker"
	s.Task = d.Task
	s.ProxyAddr = loopback(d.Ports.Proxy)
	s.ControlAddr = loopback(d.Ports.Control)
	// Every host's HTTPS is intercepted, so any https:// call is fenced;
	// the CA bundle sits beside the node's data.
	s.Intercept.Hosts = []string{"*"}
	s.Intercept.BundleFile = filepath.Join(d.DataDir, "ca-bundle.pem")
	s.SignatureHosts = d.SignatureHosts
	s.Log = d.Log
	return s
}

// Fenced returns the configuration of the embedded fenced service, fetching
// public keys from the embedded node. It is not validated.
func (d *Dev) Fenced() *Fenced {
	f := DefaultFenced()
	f.Addr = loopback(d.Ports.Fenced)
	f.KeysFrom = fmt.Sprintf("http://%s", loopback(d.Ports.HTTP))
	f.ServeLog = true // dev prints a curl line for it; loopback only
	f.Log = d.Log
	return f
}
