package console

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/fencepost/fencepost/config"
	"github.com/fencepost/fencepost/fence/pki"
	"go.uber.org/zap"
)

// Defaults of the console.
const (
	// DefaultListen is where the console listens unless told otherwise:
	// loopback, so only this machine's browser reaches it.
	DefaultListen = "127.0.0.1:7470"
	// DefaultPageSize is how many tasks one Tasks page shows.
	DefaultPageSize = 50
	// MaxPageSize bounds ?limit= of the Tasks page.
	MaxPageSize = 500
	// ScanBudget bounds how many tasks one Tasks page reads from the
	// cluster to fill a page when a filter the API cannot apply (profile,
	// worker's tasks beyond the live leases) discards most of them; the
	// page then links to where the scan stopped.
	ScanBudget = 2000
	// ScrapeEvery is how often the members' /metrics are read for the
	// Health page.
	ScrapeEvery = 10 * time.Second
)

// Errors of Config.Validate; the CLI names the flag of each.
var (
	// ErrNoCluster: Config.Cluster is nil.
	ErrNoCluster = errors.New("console: no cluster client")
	// ErrExposedWithoutToken: a listen address beyond loopback without a
	// login token.
	ErrExposedWithoutToken = errors.New("console: a listen address beyond loopback needs a login token")
	// ErrExposedWithoutTLS: a listen address beyond loopback without TLS.
	ErrExposedWithoutTLS = errors.New("console: a listen address beyond loopback needs TLS (certificate and key)")
	// ErrBadTraceURL: TraceURL breaks config.CheckTraceURL.
	ErrBadTraceURL = errors.New("console: bad trace URL template")
	// ErrBadListen: the listen address is not host:port.
	ErrBadListen = errors.New("console: listen address must be host:port")
)

// Config configures a Server. Cluster is required; every other field has
// a usable zero value.
type Config struct {
	// Listen is the address to serve on (default DefaultListen). A host
	// other than a loopback one requires Token and TLS.
	Listen string
	// Cluster is the API client, authenticated with Identity's certificate.
	Cluster Cluster
	// Identity is who the console is to the cluster (its certificate's
	// name and role). Only an operator (or the dev identity of a plain
	// loopback cluster) gets enabled actions.
	Identity pki.Identity
	// Token, when set, is the login token a browser must present once
	// (then it holds a session cookie). Required beyond loopback.
	Token string
	// TLS, when set, serves HTTPS with this configuration. Required
	// beyond loopback.
	TLS *tls.Config
	// Hosts are extra names the browser may use in the Host header (a
	// DNS name for an exposed console); the listen address, and on
	// loopback "localhost", are always allowed.
	Hosts []string
	// MetricsURLs are the /metrics pages to read for the Health page
	// (the members', and optionally sidecars' and fenced services'); a
	// counter is summed over them.
	MetricsURLs []string
	// FencedLogURL, when set, is a fenced reference service's GET /v1/log
	// (fence/refsvc, serve_log): the Task page adds the writes it accepted
	// for the task to the timeline.
	FencedLogURL string
	// TraceURL, when set, is a trace UI URL template naming
	// config.TraceIDPlaceholder: a timeline entry's trace id links there.
	TraceURL string
	// MetricsClient reads MetricsURLs and FencedLogURL (default: http.DefaultClient).
	MetricsClient *http.Client
	// Certs are certificates whose expiry the Cluster page lists, by name
	// (the console's own, the CA's); the members' are read from their
	// handshakes.
	Certs map[string]*x509.Certificate
	// MemberTLS, when set, dials the members' API addresses to list
	// their certificates' expiry (the console's client configuration).
	MemberTLS *tls.Config
	// Logger receives the audit lines of actions and watch errors.
	Logger *zap.Logger
	// Now is the clock (default time.Now); tests move it.
	Now func() time.Time
}

// Validate reports the first rule the configuration breaks.
func (c *Config) Validate() error {
	if c.Cluster == nil {
		return ErrNoCluster
	}
	if c.TraceURL != "" {
		if err := config.CheckTraceURL(c.TraceURL); err != nil {
			return fmt.Errorf("%w: %v", ErrBadTraceURL, err)
		}
	}
	listen := c.Listen
	if listen == "" {
		listen = DefaultListen
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("%w: %q: %v", ErrBadListen, listen, err)
	}
	if !IsLoopback(host) {
		if c.Token == "" {
			return ErrExposedWithoutToken
		}
		if c.TLS == nil {
			return ErrExposedWithoutTLS
		}
	}
	return nil
}

// IsLoopback reports whether host (a name or an IP) can only be reached
// from this machine: "localhost" or a loopback IP. An empty host or a
// wildcard address listens everywhere and is not.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (c Config) withDefaults() Config {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.MetricsClient == nil {
		c.MetricsClient = &http.Client{Timeout: 5 * time.Second}
	}
	return c
}

// canOperate reports whether the console's credential may revoke, cancel
// and signal: an operator's, or the dev identity of a plain cluster.
func (c *Config) canOperate() bool {
	return c.Identity.Role == pki.RoleOperator || c.Identity.Role == "dev"
}
