package main

import (
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// What TLS means for workload 5 (the proxy path): the worker's leg stays
// plain HTTP on loopback — a sidecar sits beside its worker, and the
// worker calls http:// so the sidecar can see and fence every write — and
// the upstream leg is HTTPS. The upstream serves TLS (a leaf for
// localhost and 127.0.0.1 from a bench CA), and every proxy originates
// TLS to it, verifying the leaf against that CA by the name "localhost",
// over kept-alive connections: the sidecar by tls.originate, nginx by
// proxy_pass https:// with proxy_ssl_verify and session reuse. Direct is
// the load generator speaking HTTPS to the upstream itself, so "added
// latency" still subtracts the same upstream. squid has no such
// origination without rewriting the URL (its cache_peer TLS or ssl-bump
// are other set-ups), so it is left out of the TLS pass. The sidecar's
// cluster is the TLS cluster of the pass, reached with a sidecar
// certificate.

// upstreamTLS is the HTTPS upstream of workload 5's TLS pass; nil in the
// plaintext pass, where every method says "plain".
type upstreamTLS struct {
	caFile string // the bench CA the upstream's leaf is signed by
	name   string // the name every proxy verifies the leaf by
}

// verifyName is the name in the upstream's leaf the proxies verify.
const verifyName = "localhost"

// startProxyUpstream starts workload 5's upstream: plain HTTP in the
// plaintext pass, HTTPS (with its PKI under dir) in the TLS pass.
func startProxyUpstream(dir string, ps *ports) (*proc, string, *upstreamTLS, error) {
	if sec == nil {
		p, addr, err := startUpstream(dir, ps)
		return p, addr, nil, err
	}
	d := filepath.Join(dir, "proxy-tls")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return nil, "", nil, err
	}
	pki, err := newBenchPKI(d)
	if err != nil {
		return nil, "", nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, "", nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ps.next())
	p, err := startProc("upstream-tls", filepath.Join(d, "upstream.log"), self, "upstream-tls", addr, pki.leafCert, pki.leafKey)
	if err != nil {
		return nil, "", nil, err
	}
	if err := waitFor(10*time.Second, "upstream-tls", func() error { return tcpUp(addr) }); err != nil {
		p.stop(syscall.SIGTERM, 5*time.Second)
		return nil, "", nil, err
	}
	return p, addr, &upstreamTLS{caFile: pki.caCert, name: verifyName}, nil
}

// directTLS is the load generator's TLS to the upstream for the direct
// path; nil for plain HTTP.
func (u *upstreamTLS) directTLS() *tls.Config {
	if u == nil {
		return nil
	}
	roots, err := poolFrom(u.caFile)
	if err != nil {
		return nil
	}
	return &tls.Config{RootCAs: roots, ServerName: u.name, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12}
}

// nginxPass is nginx's proxy_pass target.
func (u *upstreamTLS) nginxPass() string {
	if u == nil {
		return "http://origin"
	}
	return "https://origin"
}

// nginxTLS is nginx's origination settings, inside the location block.
func (u *upstreamTLS) nginxTLS() string {
	if u == nil {
		return ""
	}
	return fmt.Sprintf(`      proxy_ssl_trusted_certificate %s;
      proxy_ssl_verify on;
      proxy_ssl_name %s;
      proxy_ssl_server_name on;
      proxy_ssl_session_reuse on;
      proxy_ssl_protocols TLSv1.2 TLSv1.3;
`, u.caFile, u.name)
}

// sidecarTLS is the sidecar's tls block for an upstream at addr.
func (u *upstreamTLS) sidecarTLS(addr string) string {
	if u == nil {
		return ""
	}
	return fmt.Sprintf("tls:\n  originate:\n    - {host: %q, server_name: %s, ca_file: %s}\n", addr, u.name, u.caFile)
}

// sidecarClusterTLS is a sidecar's cluster_tls block in the TLS pass: the
// bench sidecar certificate, verified against fencepost's CA.
func (m *tlsMode) sidecarClusterTLS() string {
	if m == nil {
		return ""
	}
	return fmt.Sprintf("cluster_tls:\n  ca_file: %s\n  cert_file: %s\n  key_file: %s\n",
		m.fpFile("ca.pem"), m.fpFile("sidecar-"+benchSidecar+".pem"), m.fpFile("sidecar-"+benchSidecar+"-key.pem"))
}
