package proxy

import (
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/proxy/mitm"
	"github.com/fencepost/fencepost/proxy/reply"
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

// newCA creates the interception CA, or nil when interception is off.
func newCA(cfg Config) (*mitm.CA, error) {
	if len(cfg.Intercept.Hosts) == 0 {
		return nil, nil
	}
	ca, err := mitm.New(mitm.Config{Hosts: cfg.Intercept.Hosts, Validity: cfg.Intercept.CAValidity, Now: cfg.Clock.Now})
	if err != nil {
		return nil, fmt.Errorf("%w: intercept.hosts: %v", ErrInvalidConfig, err)
	}
	return ca, nil
}

// CAInfo describes the interception CA for workers.
type CAInfo struct {
	// BundleFile holds the system roots and the CA certificate.
	BundleFile string `json:"bundleFile"`
	// CertificatePEM is the CA certificate alone.
	CertificatePEM string `json:"certificatePem"`
	// Hosts are the intercepted hosts.
	Hosts []string `json:"hosts"`
	// Constrained says whether the CA is name-constrained to Hosts.
	Constrained bool `json:"constrained"`
	// NotAfter is when the CA expires (a restart creates a new one).
	NotAfter time.Time `json:"notAfter"`
	// Env lists the variables a worker sets, with their values.
	Env map[string]string `json:"env"`
}

// CAEnvVars are the variables common clients read a CA bundle from: Go
// and OpenSSL (SSL_CERT_FILE), Python requests, curl, Node.
var CAEnvVars = []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"}

// CA returns the interception CA's description, or false when
// interception is off.
func (s *Sidecar) CA() (CAInfo, bool) {
	if s.ca == nil {
		return CAInfo{}, false
	}
	env := make(map[string]string, len(CAEnvVars))
	for _, v := range CAEnvVars {
		env[v] = s.cfg.Intercept.BundleFile
	}
	return CAInfo{
		BundleFile:     s.cfg.Intercept.BundleFile,
		CertificatePEM: string(s.ca.CertPEM()),
		Hosts:          append([]string(nil), s.cfg.Intercept.Hosts...),
		Constrained:    s.ca.Constrained(),
		NotAfter:       s.ca.Certificate().NotAfter,
		Env:            env,
	}, true
}

// serveCA answers GET /v1/ca (JSON) and /v1/ca.pem: what a worker needs
// to trust the interception CA. The CA certificate is public; the key
// never leaves the process.
func (s *Sidecar) serveCA(ctx *fasthttp.RequestCtx) {
	pemOnly := string(ctx.Path()) == PathCAPEM
	info, ok := s.CA()
	if !ok {
		reply.Problem(ctx, fasthttp.StatusNotFound, reply.CodeNotFound, "interception is off",
			"no intercept.hosts are configured, so the sidecar has no CA", 0)
		return
	}
	if pemOnly {
		ctx.SetContentType("application/x-pem-file")
		ctx.SetBodyString(info.CertificatePEM)
		return
	}
	reply.JSON(ctx, info)
}

// registerCAExpiry exports when the interception CA expires. The CA is
// not renewed while the sidecar runs (a worker that loaded the bundle at
// start would not trust a new one), so intercepted calls start failing
// at that instant unless the sidecar and its worker restart before it:
// this is what an alert watches.
func registerCAExpiry(reg prometheus.Registerer, notAfter time.Time) error {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fencepost_sidecar_intercept_ca_expiry_timestamp_seconds",
		Help: "When the sidecar's interception CA expires (Unix seconds); restart the sidecar and its worker before it.",
	})
	g.Set(float64(notAfter.Unix()))
	if err := reg.Register(g); err != nil {
		return fmt.Errorf("proxy: register metrics: %w", err)
	}
	return nil
}
