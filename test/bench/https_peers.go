package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// startSquidBump runs squid-openssl as an intercepting proxy for CONNECT:
// server-first (stare at steps 1 and 2, bump at 3), so the certificate it
// mints mimics the server's, IP address included; a bare "ssl_bump bump
// all" mints a DNS-only certificate for CONNECT 127.0.0.1, which Go
// clients reject. Upstreams are verified against the bench CA.
func startSquidBump(dir string, pki benchPKI, ps *ports) (*proc, string, error) {
	addr := fmt.Sprintf("127.0.0.1:%d", ps.next())
	d := filepath.Join(dir, "squid-bump")
	db := filepath.Join(d, "ssl_db")
	certgen := squidCertgen
	head := fmt.Sprintf(`http_port %s ssl-bump tls-cert=%s tls-key=%s generate-host-certificates=on dynamic_cert_mem_cache_size=16MB
sslcrtd_program %s -s %s -M 16MB
sslcrtd_children 8 startup=2 idle=1
acl step1 at_step SslBump1
acl step2 at_step SslBump2
acl step3 at_step SslBump3
ssl_bump stare step1
ssl_bump stare step2
ssl_bump bump step3
tls_outgoing_options cafile=%s
`, addr, pki.bumpCert, pki.bumpKey, certgen, db, pki.caCert)
	return runSquid(d, addr, head, func() error {
		if out, err := exec.Command(certgen, "-c", "-s", db, "-M", "16MB").CombinedOutput(); err != nil {
			return fmt.Errorf("%s -c: %v: %s", certgen, err, out)
		}
		return nil
	})
}

// startMitmproxy runs mitmdump as a regular (CONNECT) proxy verifying
// upstreams against the bench CA; it writes its own CA into its confdir
// at start, which the load generator trusts.
func startMitmproxy(dir string, pki benchPKI, ps *ports) (*proc, string, string, error) {
	port := ps.next()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	d := filepath.Join(dir, "mitmproxy")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return nil, "", "", err
	}
	p, err := startProc("mitmproxy", filepath.Join(d, "stdout.log"), binPath("mitmdump"),
		"--listen-host", "127.0.0.1", "--listen-port", fmt.Sprint(port), "-q",
		"--set", "confdir="+d, "--set", "ssl_verify_upstream_trusted_ca="+pki.caCert,
		"--set", "http2=false", "--set", "flow_detail=0")
	if err != nil {
		return nil, "", "", err
	}
	caFile := filepath.Join(d, "mitmproxy-ca-cert.pem")
	err = waitFor(30*time.Second, "mitmproxy", func() error {
		if p.exited() {
			return errors.New(p.tail(800))
		}
		if _, err := os.Stat(caFile); err != nil {
			return err
		}
		return tcpUp(addr)
	})
	if err != nil {
		p.stop(15, 5*time.Second)
		return nil, "", "", err
	}
	return p, addr, caFile, nil
}
