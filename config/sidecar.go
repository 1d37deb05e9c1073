package config

import (
	"slices"
	"strings"
	"time"

	"github.com/fencepost/fencepost/proxy"
	"github.com/fencepost/fencepost/proxy/cluster"
	"github.com/fencepost/fencepost/proxy/mitm"
)

// Sidecar configures the per-worker sidecar (fencepost sidecar): the
// heartbeat session, the worker's HTTP proxy and its local control API.
type Sidecar struct {
	// Cluster lists cluster HTTP endpoints; any member will do, followers
	// forward to the leader.
	Cluster []string `yaml:"cluster" doc:"cluster HTTP endpoints (required unless clusters is set, comma-separated)"`
	// Clusters, instead of Cluster, names several independent clusters
	// that share the task-id space, in ctl's --clusters syntax
	// "NAME=ADDR,ADDR;NAME=ADDR,...": the sidecar keeps a session with
	// each and routes every task to its own (README "More than one
	// cluster"). Names are part of the hash: never rename one.
	Clusters string `yaml:"clusters" doc:"several clusters sharing the task ids, NAME=ADDR,ADDR;NAME=ADDR,... (instead of cluster)"`
	// ClusterTLS is the sidecar's identity toward the cluster: HTTPS to
	// the members, verified against the cluster CA, with a sidecar
	// certificate (name it after worker_id). Empty: plain HTTP, allowed
	// only for cluster endpoints on loopback.
	ClusterTLS CertFiles `yaml:"cluster_tls"`
	// WorkerID names the worker in leases and logs.
	WorkerID string `yaml:"worker_id" doc:"worker id recorded in leases (default: derived from the host name)"`
	// ProxyAddr is the worker's HTTP_PROXY; loopback only.
	ProxyAddr string `yaml:"proxy_addr" doc:"HTTP proxy listen address (loopback only)"`
	// ControlAddr serves the control API, health and metrics; loopback only.
	ControlAddr string `yaml:"control_addr" doc:"control API, health and metrics listen address (loopback only)"`
	// MetricsAddr, when set, serves only /metrics, /healthz and /readyz and
	// may be non-loopback, for kubelet probes and Prometheus.
	MetricsAddr string `yaml:"metrics_addr" doc:"optional non-loopback address serving only /metrics, /healthz, /readyz"`
	// Task, when set, is one-task mode: the sidecar creates or claims this
	// task at start and exits when it is done.
	Task string `yaml:"task" doc:"one-task mode: task id to create or claim at start"`
	// Profile is the lease profile used when one-task mode creates the task.
	Profile string `yaml:"profile" doc:"one-task mode: profile for a newly created task (default: the cluster's)"`
	// Heartbeat tunes the local lease deadline's safety margin.
	Heartbeat SidecarHeartbeat `yaml:"heartbeat"`
	// HeartbeatTransport is how heartbeats reach the cluster: "stream"
	// (one long-lived stream per member; unary to a member without it)
	// or "unary" (one HTTP request per heartbeat).
	HeartbeatTransport string `yaml:"heartbeat_transport" doc:"how heartbeats reach the cluster: stream (one long-lived stream per member) or unary (one request per heartbeat)"`
	// Writes decides which requests are writes and what reads may do.
	Writes Writes `yaml:"writes"`
	// TLS lists hosts the sidecar speaks TLS to on the worker's behalf.
	TLS TLS `yaml:"tls"`
	// Connect lists CONNECT tunnel destinations.
	Connect Connect `yaml:"connect"`
	// SignatureHosts lists the host:port targets whose requests carry the
	// signed token (X-Fencing-Signature); empty means every target. A
	// signature sent to a third-party API can be replayed by it against a
	// fenced service for the rest of the epoch, so list your fenced hosts.
	SignatureHosts []string `yaml:"signature_hosts" doc:"host:port targets that get the token signature (empty: every target)"`
	// RefuseTargets are host:port destinations the sidecar never proxies
	// to, beyond the cluster's API and its own ports: the members' raft
	// addresses belong here.
	RefuseTargets []string `yaml:"refuse_targets" doc:"host:port targets never proxied to, beyond the cluster API and the sidecar's ports (list the members' raft addresses)"`
	// Intercept configures TLS interception with the sidecar's own CA.
	Intercept Intercept `yaml:"intercept"`
	// Capture configures transparent capture (capture.go).
	Capture Capture `yaml:"capture"`
	// Limits bounds request and response sizes.
	Limits Limits `yaml:"limits"`
	// Timeouts bounds upstream calls.
	Timeouts Timeouts `yaml:"timeouts"`
	// DrainTimeout is how long in-flight requests may finish on shutdown.
	DrainTimeout Duration `yaml:"drain_timeout" doc:"time in-flight requests get to finish on shutdown"`
	// Tracing configures OpenTelemetry traces (off by default).
	Tracing Tracing `yaml:"tracing"`
	// Worker ties the worker's lifetime to its leases (worker.go).
	Worker Worker `yaml:"worker"`
	// Log configures logging.
	Log Log `yaml:"log"`
}

// SidecarHeartbeat sets the margin subtracted from validFor: the local
// deadline is send time + validFor − max(drift × validFor, margin_floor).
type SidecarHeartbeat struct {
	// Drift is the assumed worst clock-rate difference between the sidecar
	// and the cluster leader, as a fraction (0.01 = 1%).
	Drift float64 `yaml:"drift" doc:"assumed clock-rate drift bound, as a fraction (0 to 0.1)"`
	// MarginFloor is the smallest safety margin.
	MarginFloor Duration `yaml:"margin_floor" doc:"smallest safety margin before the local deadline"`
}

// Writes configures the write classification of proxied requests.
type Writes struct {
	// ReadsWithoutLease is allow or block: whether reads are proxied when
	// the task has no current lease. Writes are always blocked then.
	ReadsWithoutLease string `yaml:"reads_without_lease" doc:"allow or block reads while the lease is not current"`
	// Rules refine the default (GET, HEAD, OPTIONS and TRACE are reads,
	// every other method is a write). The first rule that matches host,
	// path prefix and method decides; no match falls back to the default.
	Rules []WriteRule `yaml:"rules" doc:"write classification rules, first match wins (inline YAML list)"`
	// Journal lists routes whose writes are journaled in the cluster: an
	// intent before the call, the outcome after, so a later owner repeating
	// the same Idempotency-Key gets the recorded response (DESIGN.md 5).
	Journal []JournalRule `yaml:"journal" doc:"routes whose writes are journaled in the cluster (inline YAML list)"`
	// Presets names built-in rule sets that classify model APIs' inference
	// endpoints as reads: openai, anthropic, google, azure-openai, mistral,
	// local-openai. They apply after Rules.
	Presets []string `yaml:"presets" doc:"built-in read rules for model inference APIs (openai, anthropic, google, azure-openai, mistral, local-openai)"`
}

// JournalRule selects writes to journal. An empty field matches anything.
type JournalRule struct {
	// Host matches the request host like WriteRule.Host.
	Host string `yaml:"host"`
	// PathPrefix matches the start of the path.
	PathPrefix string `yaml:"path_prefix"`
	// Methods lists upper-case methods.
	Methods []string `yaml:"methods"`
}

// WriteRule marks matching requests as writes or reads.
type WriteRule struct {
	// Host matches the request host: exact ("api.example.com",
	// "api.example.com:8443"), a suffix wildcard ("*.example.com") or "*".
	Host string `yaml:"host"`
	// PathPrefix matches the start of the path; empty matches every path.
	PathPrefix string `yaml:"path_prefix"`
	// Methods lists upper-case methods; empty matches every method.
	Methods []string `yaml:"methods"`
	// Write is the decision. It is required, so a rule never fails open by
	// omission.
	Write *bool `yaml:"write"`
}

// TLS configures TLS origination.
type TLS struct {
	// Originate lists hosts the worker calls over plain http:// while the
	// sidecar speaks TLS upstream, so it can still see and fence writes.
	Originate []TLSOrigination `yaml:"originate" doc:"hosts to originate TLS to (inline YAML list)"`
}

// TLSOrigination is one host the sidecar upgrades to TLS.
type TLSOrigination struct {
	// Host is the host (optionally host:port) the worker addresses.
	Host string `yaml:"host"`
	// ServerName is the SNI and verification name; empty means Host.
	ServerName string `yaml:"server_name"`
	// CAFile is a PEM bundle to verify against; empty means system roots.
	CAFile string `yaml:"ca_file"`
}

// Connect configures CONNECT tunnels.
type Connect struct {
	// Allow lists host:port destinations a CONNECT tunnel may reach. Such
	// tunnels exist only while the lease is current.
	Allow []string `yaml:"allow" doc:"host:port destinations allowed for CONNECT tunnels"`
}

// Intercept configures TLS interception: for a CONNECT to a listed host
// the sidecar completes the worker's TLS with a leaf from its own CA,
// fences every request inside, and speaks verified TLS upstream.
type Intercept struct {
	// Hosts lists intercepted hosts ("api.example.com", "*.example.com",
	// an IP, or "*" for every host). Empty: interception off.
	Hosts []string `yaml:"hosts" doc:"hosts whose TLS the sidecar intercepts to fence every request (comma-separated; * = all)"`
	// BundleFile is where the CA bundle (system roots + the sidecar CA) is
	// written; workers point SSL_CERT_FILE and friends at it.
	BundleFile string `yaml:"bundle_file" doc:"where the CA bundle (system roots + sidecar CA) is written (default: a file in the temp dir)"`
	// UpstreamCAFile verifies intercepted upstreams instead of the system roots.
	UpstreamCAFile string `yaml:"upstream_ca_file" doc:"PEM roots to verify intercepted upstreams with (default: system roots)"`
	// CAValidity is the lifetime of the CA created at every start.
	CAValidity Duration `yaml:"ca_validity" doc:"lifetime of the CA the sidecar creates at start"`
}

// Limits bounds sizes the proxy accepts.
type Limits struct {
	// MaxRequestBody caps a proxied request body.
	MaxRequestBody ByteSize `yaml:"max_request_body" doc:"largest proxied request body"`
	// MaxResponseBody caps a proxied response body.
	MaxResponseBody ByteSize `yaml:"max_response_body" doc:"largest proxied response body"`
	// MaxHeaderBytes caps request and response headers.
	MaxHeaderBytes ByteSize `yaml:"max_header_bytes" doc:"largest header block"`
}

// Timeouts bounds upstream calls.
type Timeouts struct {
	// Dial bounds connecting to an upstream.
	Dial Duration `yaml:"dial" doc:"upstream connect timeout"`
	// Upstream bounds one whole upstream exchange.
	Upstream Duration `yaml:"upstream" doc:"upstream request timeout"`
	// Idle closes idle keep-alive connections.
	Idle Duration `yaml:"idle" doc:"idle keep-alive connection timeout"`
	// UpstreamIdle closes pooled upstream connections; below common server
	// keep-alive timeouts (Node's 5 s) so the sidecar closes first.
	UpstreamIdle Duration `yaml:"upstream_idle" doc:"pooled upstream connection idle timeout (below the servers')"`
}

// DefaultSidecar returns the sidecar defaults. Cluster has no default and
// WorkerID is derived from the host name by Load.
func DefaultSidecar() *Sidecar {
	// Every value comes from package proxy, which owns it.
	return &Sidecar{
		ProxyAddr:   proxy.DefaultProxyAddr,
		ControlAddr: proxy.DefaultControlAddr,
		Heartbeat: SidecarHeartbeat{
			Drift:       proxy.DefaultDrift,
			MarginFloor: Duration(proxy.DefaultMarginFloor),
		},
		HeartbeatTransport: proxy.DefaultHeartbeatTransport,
		Writes:             Writes{ReadsWithoutLease: string(proxy.ReadsAllow)},
		Limits: Limits{
			MaxRequestBody:  proxy.DefaultMaxRequestBody,
			MaxResponseBody: proxy.DefaultMaxResponseBody,
			MaxHeaderBytes:  proxy.DefaultMaxHeaderBytes,
		},
		Timeouts: Timeouts{
			Dial:     Duration(proxy.DefaultDialTimeout),
			Upstream: Duration(proxy.DefaultUpstreamTimeout),
			Idle:     Duration(proxy.DefaultIdleTimeout),
			// Below Node's 5 s keep-alive timeout.
			UpstreamIdle: Duration(proxy.DefaultUpstreamIdleTimeout),
		},
		Intercept:    Intercept{CAValidity: Duration(mitm.DefaultValidity)},
		Capture:      defaultCapture(),
		DrainTimeout: Duration(proxy.DefaultDrainTimeout),
		Tracing:      defaultTracing(),
		Worker:       defaultWorker(),
		Log:          defaultLog(),
	}
}

// Role returns RoleSidecar.
func (s *Sidecar) Role() Role { return RoleSidecar }

// fill derives worker_id.
func (s *Sidecar) fill() {
	if s.WorkerID == "" {
		s.WorkerID = hostID()
	}
}

// Validate checks every rule that does not depend on the host.
func (s *Sidecar) Validate() error {
	var p problems
	shards := s.checkClusters(&p)
	checkEps := func(key string, eps []string) {
		for i, ep := range eps {
			checkEndpoint(&p, indexKey(key, i), ep)
			switch {
			case s.ClusterTLS.Enabled():
			case strings.HasPrefix(ep, "https://"):
				p.invalid("cluster_tls.ca_file", "must be set for an https:// endpoint (%s %q): the sidecar verifies the cluster against it", indexKey(key, i), ep)
			default:
				requireLoopbackWithoutTLS(&p, "cluster_tls.cert_file", [2]string{indexKey(key, i), strings.TrimPrefix(ep, "http://")})
			}
		}
	}
	checkEps("cluster", s.Cluster)
	for _, sh := range shards {
		checkEps("clusters."+sh.Name, sh.Endpoints)
	}
	s.ClusterTLS.validate(&p, "cluster_tls")
	checkName(&p, "worker_id", s.WorkerID)
	checkLoopbackAddr(&p, "proxy_addr", s.ProxyAddr)
	checkLoopbackAddr(&p, "control_addr", s.ControlAddr)
	if s.MetricsAddr != "" {
		checkAddr(&p, "metrics_addr", s.MetricsAddr)
	}
	if s.ProxyAddr == s.ControlAddr && !strings.HasSuffix(s.ProxyAddr, ":0") {
		p.invalid("control_addr", "must differ from proxy_addr (both %q)", s.ProxyAddr)
	}
	if strings.ContainsFunc(s.Task, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		p.invalid("task", "must not contain spaces or control characters (got %q)", s.Task)
	}
	if s.Profile != "" {
		if s.Task == "" {
			p.invalid("profile", "is only used in one-task mode; set task too")
		}
		if !validProfileName(s.Profile) {
			p.invalid("profile", "must be a profile name of a-z, 0-9, '_' and '-' (got %q)", s.Profile)
		}
	}
	if d := s.Heartbeat.Drift; d < 0 || d > 0.1 {
		p.invalid("heartbeat.drift", "must be between 0 and 0.1 (got %g)", d)
	}
	if t := s.HeartbeatTransport; t != cluster.TransportStream && t != cluster.TransportUnary {
		p.invalid("heartbeat_transport", "must be %q or %q (got %q)", cluster.TransportStream, cluster.TransportUnary, t)
	}
	if s.Heartbeat.MarginFloor < 0 {
		p.invalid("heartbeat.margin_floor", "must be >= 0 (got %s)", s.Heartbeat.MarginFloor)
	}
	s.Writes.validate(&p)
	s.TLS.validate(&p)
	checkSignatureHosts(&p, s.SignatureHosts)
	for i, a := range s.RefuseTargets {
		key := indexKey("refuse_targets", i)
		if host, port, ok := checkAddr(&p, key, a); ok && (host == "" || port == 0) {
			p.invalid(key, "must name a host and a non-zero port (got %q)", a)
		}
	}
	for i, a := range s.Connect.Allow {
		key := indexKey("connect.allow", i)
		if host, port, ok := checkAddr(&p, key, a); ok && (host == "" || port == 0) {
			p.invalid(key, "must name a host and a non-zero port (got %q)", a)
		}
	}
	for _, l := range []struct {
		key string
		v   ByteSize
	}{
		{"limits.max_request_body", s.Limits.MaxRequestBody},
		{"limits.max_response_body", s.Limits.MaxResponseBody},
		{"limits.max_header_bytes", s.Limits.MaxHeaderBytes},
	} {
		if l.v <= 0 {
			p.invalid(l.key, "must be > 0 (got %s)", l.v)
		}
	}
	checkPositive(&p, "timeouts.dial", s.Timeouts.Dial)
	checkPositive(&p, "timeouts.upstream", s.Timeouts.Upstream)
	checkPositive(&p, "timeouts.idle", s.Timeouts.Idle)
	checkPositive(&p, "timeouts.upstream_idle", s.Timeouts.UpstreamIdle)
	s.Intercept.validate(&p)
	s.Capture.validate(&p, false)
	if s.DrainTimeout < 0 {
		p.invalid("drain_timeout", "must be >= 0 (got %s)", s.DrainTimeout)
	}
	s.Tracing.validate(&p)
	s.Worker.validate(&p)
	s.Log.validate(&p)
	return p.err()
}

// validate checks the read policy and every rule.
func (w Writes) validate(p *problems) {
	if w.ReadsWithoutLease != "allow" && w.ReadsWithoutLease != "block" {
		p.invalid("writes.reads_without_lease", "must be allow or block (got %q)", w.ReadsWithoutLease)
	}
	for i, r := range w.Rules {
		key := indexKey("writes.rules", i)
		checkHostPattern(p, key+".host", r.Host)
		if r.PathPrefix != "" && !strings.HasPrefix(r.PathPrefix, "/") {
			p.invalid(key+".path_prefix", "must start with / (got %q)", r.PathPrefix)
		}
		for j, m := range r.Methods {
			if m == "" || strings.ToUpper(m) != m || strings.ContainsFunc(m, func(r rune) bool { return r < 'A' || r > 'Z' }) {
				p.invalid(indexKey(key+".methods", j), "must be an upper-case HTTP method such as POST (got %q)", m)
			}
		}
		if r.Write == nil {
			p.invalid(key+".write", "must be set to true or false")
		}
	}
	for i, name := range w.Presets {
		if !slices.Contains(proxy.PresetNames(), name) {
			p.invalid(indexKey("writes.presets", i), "must be one of %s (got %q)", strings.Join(proxy.PresetNames(), ", "), name)
		}
	}
	for i, r := range w.Journal {
		key := indexKey("writes.journal", i)
		if r.Host != "" {
			checkHostPattern(p, key+".host", r.Host)
		}
		if r.PathPrefix != "" && !strings.HasPrefix(r.PathPrefix, "/") {
			p.invalid(key+".path_prefix", "must start with / (got %q)", r.PathPrefix)
		}
		for j, m := range r.Methods {
			if m == "" || strings.ToUpper(m) != m {
				p.invalid(indexKey(key+".methods", j), "must be an upper-case HTTP method such as POST (got %q)", m)
			}
		}
	}
}

// validate checks each TLS origination entry.
func (t TLS) validate(p *problems) {
	seen := map[string]bool{}
	for i, o := range t.Originate {
		key := indexKey("tls.originate", i)
		checkHostPattern(p, key+".host", o.Host)
		if seen[o.Host] {
			p.invalid(key+".host", "%q is listed twice", o.Host)
		}
		seen[o.Host] = true
		checkPEMFile(p, key+".ca_file", o.CAFile)
	}
}

// validate checks the intercepted hosts and the CA lifetime.
func (in Intercept) validate(p *problems) {
	for i, h := range in.Hosts {
		key := indexKey("intercept.hosts", i)
		checkHostPattern(p, key, h)
		if strings.Contains(h, ":") && !strings.HasPrefix(h, "[") && strings.Count(h, ":") == 1 {
			p.invalid(key, "is a host without a port: every port of it is intercepted (got %q)", h)
		}
	}
	if in.CAValidity < Duration(time.Hour) || in.CAValidity > Duration(90*24*time.Hour) {
		p.invalid("intercept.ca_validity", "must be from 1h to 90 days: the CA is short-lived (got %s)", in.CAValidity)
	}
}

// checkHostPattern checks a host match: "*", "*.example.com", "example.com"
// or "example.com:8443"; never a URL.
func checkHostPattern(p *problems, key, h string) {
	switch {
	case h == "":
		p.invalid(key, "must not be empty (use \"*\" for every host)")
	case strings.Contains(h, "/") || strings.ContainsFunc(h, func(r rune) bool { return r <= ' ' }):
		p.invalid(key, "must be a host name such as api.example.com, not a URL (got %q)", h)
	case h != "*" && strings.Contains(strings.TrimPrefix(h, "*."), "*"):
		p.invalid(key, "may only use a wildcard as a leading \"*.\" (got %q)", h)
	}
}

// CheckRuntime checks that both ports are free and CA files are readable.
func (s *Sidecar) CheckRuntime() error {
	var p problems
	checkPortFree(&p, "proxy_addr", s.ProxyAddr)
	checkPortFree(&p, "control_addr", s.ControlAddr)
	if s.Capture.Listen != "" {
		checkPortFree(&p, "capture.listen", s.Capture.Listen)
	}
	s.ClusterTLS.checkRuntime(&p, "cluster_tls")
	if s.MetricsAddr != "" {
		checkPortFree(&p, "metrics_addr", s.MetricsAddr)
	}
	for i, o := range s.TLS.Originate {
		checkReadable(&p, indexKey("tls.originate", i)+".ca_file", o.CAFile)
	}
	checkReadable(&p, "intercept.upstream_ca_file", s.Intercept.UpstreamCAFile)
	return p.err()
}

// checkSignatureHosts checks signature_hosts (sidecar and dev): each a host
// and a non-zero port.
func checkSignatureHosts(p *problems, hosts []string) {
	for i, a := range hosts {
		key := indexKey("signature_hosts", i)
		if host, port, ok := checkAddr(p, key, a); ok && (host == "" || port == 0) {
			p.invalid(key, "must name a host and a non-zero port (got %q)", a)
		}
	}
}
