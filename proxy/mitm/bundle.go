package mitm

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// systemBundles are the files Go's crypto/x509 reads the system roots
// from on Linux, first existing wins; SSL_CERT_FILE, when set for the
// sidecar itself, comes first.
var systemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",                // Debian, Ubuntu, Gentoo, Alpine
	"/etc/pki/tls/certs/ca-bundle.crt",                  // Fedora, RHEL 6
	"/etc/ssl/ca-bundle.pem",                            // openSUSE
	"/etc/pki/tls/cacert.pem",                           // OpenELEC
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", // CentOS, RHEL 7
	"/etc/ssl/cert.pem",                                 // Alpine, macOS
}

// SystemRootsPEM returns the system's root bundle in PEM, or nil when
// none is found. Go, OpenSSL and Node clients pointed at a bundle file
// trust only that file, so the interception bundle must carry these too.
func SystemRootsPEM() []byte {
	files := systemBundles
	if f := os.Getenv("SSL_CERT_FILE"); f != "" {
		files = append([]string{f}, files...)
	}
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, []byte("-----BEGIN CERTIFICATE-----")) {
			return b
		}
	}
	return nil
}

// WriteBundle writes the system roots followed by the CA certificate to
// path (mode 0644: a bundle holds only public certificates), replacing
// the file atomically so a worker never reads half of it.
func (ca *CA) WriteBundle(path string) error {
	var b bytes.Buffer
	if roots := SystemRootsPEM(); roots != nil {
		b.Write(roots)
		if !bytes.HasSuffix(roots, []byte("\n")) {
			b.WriteByte('\n')
		}
	}
	b.WriteString("# fencepost sidecar interception CA\n")
	b.Write(ca.CertPEM())
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".fencepost-ca-*")
	if err != nil {
		return fmt.Errorf("mitm: write CA bundle: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(b.Bytes()); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("mitm: write CA bundle: %w", err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("mitm: write CA bundle: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("mitm: write CA bundle: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("mitm: write CA bundle: %w", err)
	}
	return nil
}

// ServerConfig returns the TLS configuration that completes a worker's
// handshake inside a CONNECT tunnel to connectHost: a leaf for the SNI
// (the CONNECT host when the client sent none), refused when the SNI
// names another host, ALPN http/1.1 only, TLS 1.2 or later.
func (ca *CA) ServerConfig(connectHost string) *tls.Config {
	want := strings.ToLower(strings.TrimSuffix(strings.Trim(connectHost, "[]"), "."))
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			name := strings.ToLower(strings.TrimSuffix(hello.ServerName, "."))
			if name == "" {
				name = want
			}
			if name != want {
				return nil, fmt.Errorf("%w: SNI %q, CONNECT %q", ErrSNIMismatch, name, want)
			}
			return ca.Leaf(name)
		},
	}
}
