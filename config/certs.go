package config

import (
	"fmt"
	"net"

	"github.com/fencepost/fencepost/fence/pki"
)

// CertFiles names the PEM files of one fencepost identity, as written by
// `fencepost tls cert create`: the cluster CA it trusts, its certificate
// and its key. The files are read again when they change (rotation needs
// no restart).
type CertFiles struct {
	// CAFile is the cluster CA certificate bundle (PEM).
	CAFile string `yaml:"ca_file" doc:"cluster CA certificate (PEM), from 'fencepost tls ca create'"`
	// CertFile is this identity's certificate (PEM).
	CertFile string `yaml:"cert_file" doc:"this identity's certificate (PEM), from 'fencepost tls cert create'"`
	// KeyFile is this identity's private key (PEM, mode 0600).
	KeyFile string `yaml:"key_file" doc:"this identity's private key (PEM, 0600)"`
	// CRLFile is the cluster's revocation list (PEM), optional: a peer
	// whose certificate it lists is refused on every port.
	CRLFile string `yaml:"crl_file" doc:"revocation list (PEM) from 'fencepost tls crl create'; listed certificates are refused; re-read when it changes"`
}

// Enabled reports whether any file is set (TLS is on).
func (c CertFiles) Enabled() bool {
	return c.CAFile != "" || c.CertFile != "" || c.KeyFile != "" || c.CRLFile != ""
}

// validate checks that the three files are set together.
func (c CertFiles) validate(p *problems, prefix string) {
	if !c.Enabled() {
		return
	}
	for _, f := range []struct{ key, v string }{{"ca_file", c.CAFile}, {"cert_file", c.CertFile}, {"key_file", c.KeyFile}} {
		if f.v == "" {
			p.invalid(prefix+"."+f.key, "must be set with %s.ca_file, %[1]s.cert_file and %[1]s.key_file (TLS needs all three)", prefix)
		}
	}
}

// checkRuntime checks the files are readable.
func (c CertFiles) checkRuntime(p *problems, prefix string) {
	checkReadable(p, prefix+".ca_file", c.CAFile)
	checkReadable(p, prefix+".cert_file", c.CertFile)
	checkReadable(p, prefix+".key_file", c.KeyFile)
	if c.CRLFile != "" {
		checkReadable(p, prefix+".crl_file", c.CRLFile)
	}
}

// Source loads the files; nil (and no error) when TLS is off.
func (c CertFiles) Source(prefix string) (*pki.Source, error) {
	if !c.Enabled() {
		return nil, nil
	}
	src, err := pki.NewSource(pki.Files{CA: c.CAFile, Cert: c.CertFile, Key: c.KeyFile, CRL: c.CRLFile})
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, prefix, err)
	}
	return src, nil
}

// requireLoopbackWithoutTLS reports every listen address that is not on
// loopback while TLS is off: plain HTTP and plaintext raft are for
// loopback development only.
func requireLoopbackWithoutTLS(p *problems, tlsKey string, addrs ...[2]string) {
	for _, a := range addrs {
		host, _, err := net.SplitHostPort(a[1])
		if err != nil || host == "" {
			continue // reported by the address checks
		}
		if host == "localhost" {
			continue
		}
		if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
			continue
		}
		p.invalid(tlsKey, "must be set when %s is not loopback (got %q): plaintext is for loopback development only", a[0], a[1])
	}
}
