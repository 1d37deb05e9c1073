package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// benchPKI is workload 7's test PKI: a CA, and a leaf for 127.0.0.1 the
// HTTPS upstream serves, each in PEM files under dir.
type benchPKI struct {
	caCert, caKey     string // the upstream's CA (every proxy verifies against it)
	leafCert, leafKey string // the upstream's certificate for 127.0.0.1
	bumpCert, bumpKey string // a second CA for squid's ssl-bump to mint with
}

func newBenchPKI(dir string) (benchPKI, error) {
	p := benchPKI{
		caCert: filepath.Join(dir, "ca.pem"), caKey: filepath.Join(dir, "ca.key"),
		leafCert: filepath.Join(dir, "upstream.pem"), leafKey: filepath.Join(dir, "upstream.key"),
		bumpCert: filepath.Join(dir, "squid-ca.pem"), bumpKey: filepath.Join(dir, "squid-ca.key"),
	}
	ca, caKey, err := writeCert(p.caCert, p.caKey, &x509.Certificate{Subject: pkix.Name{CommonName: "bench upstream CA"},
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}, nil, nil)
	if err != nil {
		return p, err
	}
	// A subject CN, as real servers have: squid's server-first bumping
	// mimics the subject and copies the alternative names only then.
	if _, _, err := writeCert(p.leafCert, p.leafKey, &x509.Certificate{Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:    []string{"localhost"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}, ca, caKey); err != nil {
		return p, err
	}
	_, _, err = writeCert(p.bumpCert, p.bumpKey, &x509.Certificate{Subject: pkix.Name{CommonName: "bench squid ssl-bump CA"},
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}, nil, nil)
	return p, err
}

// writeCert creates an ECDSA P-256 key and a certificate from tmpl,
// signed by parent (self-signed when nil), valid for a day.
func writeCert(certFile, keyFile string, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, err
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o644); err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

// poolFrom reads PEM certificates into a pool.
func poolFrom(files ...string) (*x509.CertPool, error) {
	p := x509.NewCertPool()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		p.AppendCertsFromPEM(b)
	}
	return p, nil
}
