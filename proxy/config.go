package proxy

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/proxy/cluster"
	"github.com/fencepost/fencepost/proxy/mitm"
	"github.com/fencepost/fencepost/proxy/workertie"
)

// Intercept configures TLS interception: for a CONNECT to a listed host
// the sidecar completes the worker's TLS handshake with a leaf from its
// own CA (package proxy/mitm), reads every request in the tunnel and
// runs it through the same checks as a proxied one, and speaks verified
// TLS upstream. The worker must trust the CA: point SSL_CERT_FILE,
// REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE and NODE_EXTRA_CA_CERTS at
// BundleFile. Clients that pin certificates cannot be intercepted:
// leave their hosts out.
type Intercept struct {
	// Hosts lists intercepted hosts: "api.example.com", "*.example.com",
	// an IP literal, or "*" for every host. Empty: interception off. The
	// CA is name-constrained to the list unless it has "*".
	Hosts []string
	// BundleFile is where the CA bundle (system roots + the CA) is
	// written at Start. Default a per-process file in os.TempDir().
	BundleFile string
	// UpstreamCAFile is a PEM bundle of roots that intercepted upstreams
	// are verified against instead of the system pool.
	UpstreamCAFile string
	// CAValidity is the CA's lifetime; the CA is created anew at every
	// start. Default 7 days.
	CAValidity time.Duration
	// HandshakeTimeout bounds a tunnel's first bytes and the worker's TLS
	// handshake. Default 10s.
	HandshakeTimeout time.Duration
}

func (in Intercept) validate() error {
	if len(in.Hosts) > 0 {
		if err := mitm.CheckHosts(in.Hosts); err != nil {
			return fmt.Errorf("%w: intercept.hosts: %v", ErrInvalidConfig, err)
		}
	}
	if in.UpstreamCAFile != "" {
		if _, err := os.Stat(in.UpstreamCAFile); err != nil {
			return fmt.Errorf("%w: intercept.upstreamCAFile: %v", ErrInvalidConfig, err)
		}
	}
	return nil
}

// Config configures a Sidecar. The zero value of every field but WorkerID
// has a usable default (applied by New); Validate checks the rest.
type Config struct {
	// Endpoints are the cluster's HTTP addresses. New uses them to build
	// a *cluster.Client when it is given no Cluster.
	Endpoints []string
	// Clusters, instead of Endpoints and New's Cluster, are several
	// independent clusters that share the task-id space (README "More
	// than one cluster"): the sidecar keeps one session per cluster and
	// routes each task to its own (clusters.go). Empty: one cluster.
	Clusters []ClusterShard
	// WorkerID names the worker in the session and the X-Fencing-Holder
	// header. Required.
	WorkerID string
	// ProxyAddr is the loopback address of the forward proxy.
	// Default 127.0.0.1:7480.
	ProxyAddr string
	// ControlAddr is the loopback address of the control API, health and
	// metrics. Default 127.0.0.1:7481.
	ControlAddr string
	// MetricsAddr, when set, serves only /metrics, /healthz and /readyz on
	// an address that may be non-loopback, so kubelet probes and Prometheus
	// can reach a sidecar whose control API stays on loopback. Empty: off.
	MetricsAddr string

	// Task, when set, is acquired (created when missing) at start and
	// readiness waits for it: one-task mode.
	Task string
	// Profile is the profile a task is created with in one-task mode.
	Profile string

	// Drift is the bound on clock-rate difference between sidecar and
	// cluster, as a fraction of the validity. Default 0.01.
	Drift float64
	// MarginFloor is the minimum safety margin subtracted from every
	// validity. Default 200ms.
	MarginFloor time.Duration
	// SessionHeartbeat is the heartbeat interval while no lease is held.
	// Default 5s.
	SessionHeartbeat time.Duration
	// ClusterTimeout bounds every cluster call. Default 5s.
	ClusterTimeout time.Duration
	// HeartbeatTransport is how heartbeats reach the cluster when New
	// builds the cluster client: cluster.TransportStream (one long-lived
	// stream per member, the default) or cluster.TransportUnary.
	HeartbeatTransport string

	// ReadsWithoutLease is the read policy. Default ReadsAllow.
	ReadsWithoutLease ReadPolicy
	// WriteRules refine the write classification.
	WriteRules []WriteRule
	// TLSOriginate lists hosts the sidecar reaches over TLS.
	TLSOriginate []TLSOrigin
	// ConnectAllow lists the host:port targets CONNECT may tunnel to.
	ConnectAllow []string
	// RefuseTargets are host:port destinations the sidecar never proxies
	// to, beyond the cluster's API endpoints (always refused) and its own
	// ports: list the members' raft addresses here. A member host that
	// is not this machine is refused on every port anyway.
	RefuseTargets []string
	// SignatureHosts lists the host:port targets that receive
	// X-Fencing-Signature; nil means every target (signhosts.go).
	SignatureHosts []string
	// Intercept configures TLS interception of CONNECT tunnels.
	Intercept Intercept
	// Capture configures the transparent listener (captureconfig.go).
	Capture Capture
	// WritePresets names built-in rule sets (see Presets) that classify
	// model inference endpoints as reads; they apply after WriteRules.
	WritePresets []string
	// Journal marks writes whose effects are journaled in the cluster
	// (DESIGN.md 5); the Cluster must then implement Journal.
	Journal []JournalRule
	// MaxJournalBody bounds the response body recorded for a journaled
	// write. Default 1 MiB.
	MaxJournalBody int64

	// MaxRequestBody bounds a request body. Default 10 MiB.
	MaxRequestBody int
	// MaxResponseBody bounds a response body; a longer one is cut.
	// Default 64 MiB.
	MaxResponseBody int64
	// MaxHeaderBytes bounds a request's header block. Default 64 KiB.
	MaxHeaderBytes int

	// DialTimeout bounds connecting upstream. Default 5s.
	DialTimeout time.Duration
	// UpstreamTimeout bounds every wait for upstream progress (a write
	// to it, or a read of the next bytes of its response), so a hung
	// upstream fails while a slow token stream keeps flowing.
	// Default 60s.
	UpstreamTimeout time.Duration
	// ReadTimeout bounds reading a whole request from the worker, which
	// defeats slowloris clients. Default 30s.
	ReadTimeout time.Duration
	// IdleTimeout closes idle keep-alive connections. Default 90s.
	IdleTimeout time.Duration
	// UpstreamIdleTimeout closes pooled upstream connections idle this
	// long. It is below common servers' keep-alive timeouts (Node's 5 s,
	// nginx's 75 s, fenced's 60 s), so the sidecar closes first and never
	// hands a write a connection the server is closing. Default 4s.
	UpstreamIdleTimeout time.Duration
	// DrainTimeout bounds how long Shutdown waits for in-flight requests
	// while still heartbeating. Default 30s.
	DrainTimeout time.Duration

	// Worker ties the worker's lifetime to its leases (DESIGN.md 17):
	// `fencepost run`'s child supervision and the health probe; package
	// workertie owns its defaults. No probe runs unless Worker.Health
	// names a URL or a command.
	Worker workertie.Config

	// Logger receives the sidecar's logs. Default zap.NewNop().
	Logger *zap.Logger
	// TracerProvider, when set, makes each proxied request a span and each
	// lease event a short span (package proxy/proxytrace). Nil is tracing
	// off, at no cost per request.
	TracerProvider trace.TracerProvider
	// Registerer receives the sidecar's metrics. Default a private
	// registry. When it is also a prometheus.Gatherer, /metrics serves it.
	Registerer prometheus.Registerer
	// Clock is the time source. Default SystemClock.
	Clock Clock
}

// Default values of Config fields. They are the sidecar's defaults
// everywhere: package config builds the CLI's defaults from them, and a
// test there proves the two agree.
const (
	DefaultProxyAddr        = "127.0.0.1:7480"
	DefaultControlAddr      = "127.0.0.1:7481"
	DefaultDrift            = 0.01
	DefaultMarginFloor      = 200 * time.Millisecond
	DefaultSessionHeartbeat = 5 * time.Second
	DefaultClusterTimeout   = 5 * time.Second
	// DefaultHeartbeatTransport is the cluster client's own default.
	DefaultHeartbeatTransport = cluster.DefaultHeartbeatTransport
	DefaultMaxRequestBody     = 10 << 20
	DefaultMaxResponseBody    = 64 << 20
	DefaultMaxHeaderBytes     = 64 << 10
	DefaultMaxJournalBody     = 1 << 20
	DefaultDialTimeout        = 5 * time.Second
	DefaultUpstreamTimeout    = 60 * time.Second
	DefaultReadTimeout        = 30 * time.Second
	DefaultIdleTimeout        = 90 * time.Second
	// DefaultUpstreamIdleTimeout is below Node's 5 s keep-alive timeout.
	DefaultUpstreamIdleTimeout = 4 * time.Second
	DefaultHandshakeTimeout    = 10 * time.Second
	DefaultDrainTimeout        = 30 * time.Second
)

// WithDefaults returns c with every zero field set to its default: the
// configuration New runs with.
func (c Config) WithDefaults() Config {
	setStr := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	setDur := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	setStr(&c.ProxyAddr, DefaultProxyAddr)
	setStr(&c.ControlAddr, DefaultControlAddr)
	if c.Drift == 0 {
		c.Drift = DefaultDrift
	}
	setDur(&c.MarginFloor, DefaultMarginFloor)
	setDur(&c.SessionHeartbeat, DefaultSessionHeartbeat)
	setDur(&c.ClusterTimeout, DefaultClusterTimeout)
	setStr(&c.HeartbeatTransport, DefaultHeartbeatTransport)
	if c.ReadsWithoutLease == "" {
		c.ReadsWithoutLease = ReadsAllow
	}
	if c.MaxRequestBody == 0 {
		c.MaxRequestBody = DefaultMaxRequestBody
	}
	if c.MaxResponseBody == 0 {
		c.MaxResponseBody = DefaultMaxResponseBody
	}
	if c.MaxJournalBody == 0 {
		c.MaxJournalBody = DefaultMaxJournalBody
	}
	if c.MaxHeaderBytes == 0 {
		c.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	setDur(&c.DialTimeout, DefaultDialTimeout)
	setDur(&c.UpstreamTimeout, DefaultUpstreamTimeout)
	setDur(&c.ReadTimeout, DefaultReadTimeout)
	setDur(&c.IdleTimeout, DefaultIdleTimeout)
	setDur(&c.UpstreamIdleTimeout, DefaultUpstreamIdleTimeout)
	setDur(&c.Intercept.HandshakeTimeout, DefaultHandshakeTimeout)
	setDur(&c.Intercept.CAValidity, mitm.DefaultValidity)
	if len(c.Intercept.Hosts) > 0 && c.Intercept.BundleFile == "" {
		c.Intercept.BundleFile = filepath.Join(os.TempDir(), fmt.Sprintf("fencepost-ca-bundle-%d.pem", os.Getpid()))
	}
	setDur(&c.DrainTimeout, DefaultDrainTimeout)
	c.Worker = c.Worker.WithDefaults()
	if c.Capture.OtherTCP == "" {
		c.Capture.OtherTCP = DefaultOtherTCP
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	if c.Clock == nil {
		c.Clock = SystemClock{}
	}
	return c
}

// Validate checks c after defaults are applied. Each error wraps
// ErrInvalidConfig and names the field and the rule it breaks.
func (c Config) Validate() error {
	c = c.WithDefaults()
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
	}
	if err := fence.ValidTask(c.WorkerID); err != nil {
		return bad("workerId", "required, 1..%d bytes without control characters", fence.MaxTaskLen)
	}
	if err := c.Worker.Validate(); err != nil {
		return fmt.Errorf("%w: worker: %w", ErrInvalidConfig, err)
	}
	if c.Task != "" {
		if err := fence.ValidTask(c.Task); err != nil {
			return bad("task", "%v", err)
		}
	}
	if err := c.validateClusters(); err != nil {
		return err
	}
	for _, a := range []struct{ field, addr string }{{"proxyAddr", c.ProxyAddr}, {"controlAddr", c.ControlAddr}} {
		if err := checkLoopback(a.addr); err != nil {
			return bad(a.field, "%v", err)
		}
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			return bad("metricsAddr", "must be host:port: %v", err)
		}
	}
	if c.ProxyAddr == c.ControlAddr && !strings.HasSuffix(c.ProxyAddr, ":0") {
		return bad("controlAddr", "must differ from proxyAddr")
	}
	if c.Drift < 0 || c.Drift >= 0.5 {
		return bad("drift", "must be in [0, 0.5), got %v", c.Drift)
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{
		{"marginFloor", c.MarginFloor}, {"sessionHeartbeat", c.SessionHeartbeat},
		{"clusterTimeout", c.ClusterTimeout}, {"dialTimeout", c.DialTimeout},
		{"upstreamTimeout", c.UpstreamTimeout}, {"readTimeout", c.ReadTimeout},
		{"idleTimeout", c.IdleTimeout}, {"drainTimeout", c.DrainTimeout},
		{"upstreamIdleTimeout", c.UpstreamIdleTimeout},
		{"intercept.handshakeTimeout", c.Intercept.HandshakeTimeout}, {"intercept.caValidity", c.Intercept.CAValidity},
	} {
		if d.v < 0 {
			return bad(d.field, "must not be negative, got %v", d.v)
		}
	}
	if t := c.HeartbeatTransport; t != "" && t != cluster.TransportStream && t != cluster.TransportUnary {
		return bad("heartbeatTransport", "must be %q or %q, got %q", cluster.TransportStream, cluster.TransportUnary, t)
	}
	if c.ReadsWithoutLease != ReadsAllow && c.ReadsWithoutLease != ReadsBlock {
		return bad("readsWithoutLease", "must be %q or %q, got %q", ReadsAllow, ReadsBlock, c.ReadsWithoutLease)
	}
	if c.MaxRequestBody < 0 || c.MaxResponseBody < 0 {
		return bad("maxRequestBody/maxResponseBody", "must not be negative")
	}
	if c.MaxHeaderBytes < 1024 {
		return bad("maxHeaderBytes", "must be at least 1024, got %d", c.MaxHeaderBytes)
	}
	for i, r := range c.WriteRules {
		field := fmt.Sprintf("writeRules[%d]", i)
		if r.Host == "" && r.PathPrefix == "" && len(r.Methods) == 0 {
			return bad(field, "needs a host, a pathPrefix or methods")
		}
		if r.PathPrefix != "" && r.PathPrefix[0] != '/' {
			return bad(field+".pathPrefix", "must start with '/', got %q", r.PathPrefix)
		}
		for _, m := range r.Methods {
			if !isToken(m) {
				return bad(field+".methods", "%q is not an HTTP method token", m)
			}
		}
	}
	for i, r := range c.Journal {
		if r.PathPrefix != "" && r.PathPrefix[0] != '/' {
			return bad(fmt.Sprintf("journal[%d].pathPrefix", i), "must start with '/', got %q", r.PathPrefix)
		}
	}
	for i, o := range c.TLSOriginate {
		field := fmt.Sprintf("tls.originate[%d]", i)
		if o.Host == "" || strings.ContainsAny(o.Host, "/ ") {
			return bad(field+".host", "must be a host name or host:port, got %q", o.Host)
		}
		if o.CAFile != "" {
			if _, err := os.Stat(o.CAFile); err != nil {
				return bad(field+".caFile", "%v", err)
			}
		}
	}
	if err := c.Intercept.validate(); err != nil {
		return err
	}
	if err := c.Capture.validate(); err != nil {
		return err
	}
	for i, p := range c.WritePresets {
		if _, ok := Presets[p]; !ok {
			return bad(fmt.Sprintf("writePresets[%d]", i), "unknown preset %q (known: %s)", p, strings.Join(PresetNames(), ", "))
		}
	}
	for i, a := range c.ConnectAllow {
		if _, _, err := splitHostPort(a); err != nil {
			return bad(fmt.Sprintf("connect.allow[%d]", i), "must be host:port: %v", err)
		}
	}
	return nil
}

// checkLoopback accepts host:port where host is a loopback IP or
// "localhost": the sidecar's ports must never be reachable off the pod.
func checkLoopback(addr string) error {
	host, _, err := splitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("must be a loopback address, got %q", addr)
	}
	return nil
}

// splitHostPort splits host:port and checks the port is 0..65535.
func splitHostPort(addr string) (host string, port int, err error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 0 || n > 65535 {
		return "", 0, fmt.Errorf("bad port %q", p)
	}
	if h == "" {
		return "", 0, fmt.Errorf("missing host in %q", addr)
	}
	return strings.ToLower(h), n, nil
}

// isToken reports whether s is a non-empty RFC 9110 token.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}
