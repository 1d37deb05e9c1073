package proxy

import (
	"fmt"
	"os"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/proxy/mitm"
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
	if s.pipe.ca == nil {
		return CAInfo{}, false
	}
	env := make(map[string]string, len(CAEnvVars))
	for _, v := range CAEnvVars {
		env[v] = s.cfg.Intercept.BundleFile
	}
	return CAInfo{
		BundleFile:     s.cfg.Intercept.BundleFile,
		CertificatePEM: string(s.pipe.ca.CertPEM()),
		Hosts:          append([]string(nil), s.cfg.Intercept.Hosts...),
		Constrained:    s.pipe.ca.Constrained(),
		NotAfter:       s.pipe.ca.Certificate().NotAfter,
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
		Problem(ctx, fasthttp.StatusNotFound, CodeNotFound, "interception is off",
			"no intercept.hosts are configured, so the sidecar has no CA", 0)
		return
	}
	if pemOnly {
		ctx.SetContentType("application/x-pem-file")
		ctx.SetBodyString(info.CertificatePEM)
		return
	}
	JSON(ctx, info)
}
