package proxy

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/proxy/mitm"
	"github.com/fencepost/fencepost/proxy/reply"
)

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

// caInfo describes ca, created for in, for workers.
func caInfo(ca *mitm.CA, in Intercept) CAInfo {
	env := make(map[string]string, len(CAEnvVars))
	for _, v := range CAEnvVars {
		env[v] = in.BundleFile
	}
	return CAInfo{
		BundleFile:     in.BundleFile,
		CertificatePEM: string(ca.CertPEM()),
		Hosts:          append([]string(nil), in.Hosts...),
		Constrained:    ca.Constrained(),
		NotAfter:       ca.Certificate().NotAfter,
		Env:            env,
	}
}

// serveCA answers GET /v1/ca (JSON) and /v1/ca.pem: what a worker needs
// to trust the interception CA. The CA certificate is public; the key
// never leaves the process. ca is Sidecar.CA.
func serveCA(ca func() (CAInfo, bool), ctx *fasthttp.RequestCtx) {
	pemOnly := string(ctx.Path()) == PathCAPEM
	info, ok := ca()
	if !ok {
		reply.Problem(ctx, reply.CodeNotFound, "interception is off",
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

// registerCAExpiry exports when the signing interception CA expires. The
// CA renews itself while the sidecar runs (reportRenewal logs each step),
// so the gauge moves forward at every switch; it stops moving only when a
// renewal keeps failing, which is what an alert watches.
func registerCAExpiry(reg prometheus.Registerer, ca *mitm.CA) error {
	g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fencepost_sidecar_intercept_ca_expiry_timestamp_seconds",
		Help: "When the sidecar's signing interception CA expires (Unix seconds); it renews itself, so a value that nears now means renewal is failing.",
	}, func() float64 { return float64(ca.Certificate().NotAfter.Unix()) })
	if err := reg.Register(g); err != nil {
		return fmt.Errorf("proxy: register metrics: %w", err)
	}
	return nil
}
