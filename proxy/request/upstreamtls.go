package request

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/fencepost/fencepost/fence/pki"
)

// newInterceptTLS is the upstream TLS configuration of intercepted
// requests: verified against caFile's roots, or the system's when
// caFile is empty; fasthttp sets the server name (SNI and verified name)
// to the CONNECT host. It never skips verification.
func newInterceptTLS(caFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile == "" {
		return cfg, nil
	}
	pool, err := pki.LoadPool(caFile)
	if err != nil {
		return nil, fmt.Errorf("%w: intercept.upstreamCAFile: %v", ErrInvalidConfig, err)
	}
	cfg.RootCAs = pool
	return cfg, nil
}

// tlsFailure names why an upstream TLS handshake failed, or returns ""
// when err is not a TLS failure.
func tlsFailure(err error) string {
	var (
		unknown  x509.UnknownAuthorityError
		invalid  x509.CertificateInvalidError
		hostname x509.HostnameError
		verify   *tls.CertificateVerificationError
		record   tls.RecordHeaderError
		alert    tls.AlertError
	)
	switch {
	case errors.As(err, &unknown):
		return "certificate signed by an unknown authority"
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return "certificate expired or not yet valid: " + invalid.Detail
	case errors.As(err, &invalid):
		return "invalid certificate: " + invalid.Error()
	case errors.As(err, &hostname):
		return "certificate not valid for " + hostname.Host + ": " + hostname.Error()
	case errors.As(err, &verify):
		return "certificate verification failed: " + verify.Err.Error()
	case errors.As(err, &record):
		return "the upstream does not speak TLS"
	case errors.As(err, &alert):
		return "the upstream refused the handshake: " + alert.Error()
	}
	return ""
}
