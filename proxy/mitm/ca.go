// Package mitm owns the sidecar's interception CA: a short-lived ECDSA
// P-256 certificate authority created at start whose private key never
// leaves the process, the leaf certificates it mints per TLS server name
// (cached, bounded), and the CA bundle file (system roots + this CA) that
// workers point SSL_CERT_FILE, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE and
// NODE_EXTRA_CA_CERTS at.
//
// Where the list of intercepted hosts allows it, the CA carries critical
// X.509 name constraints permitting exactly those names (DNS subtrees for
// host names, single addresses for IP literals), so a leaked key cannot
// mint a certificate a client would accept for any other host. A list
// containing "*" (intercept every host, as `fencepost dev` does) cannot
// be constrained.
package mitm

import (
	"container/list"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"sync"
	"time"
)

// Sentinel errors; returned errors wrap them.
var (
	// ErrInvalidHost means a host pattern or server name is not a host
	// name, "*.suffix", "*" or an IP literal.
	ErrInvalidHost = errors.New("invalid host")
	// ErrNotIntercepted means a leaf was asked for a name outside the
	// CA's host list.
	ErrNotIntercepted = errors.New("host not intercepted")
	// ErrSNIMismatch means the TLS client named another server than the
	// CONNECT authority it tunnels to.
	ErrSNIMismatch = errors.New("TLS server name does not match the CONNECT host")
)

// Defaults of Config.
const (
	DefaultValidity  = 7 * 24 * time.Hour
	DefaultLeafCache = 1024
	// leafValidity bounds a minted leaf; it never outlives the CA.
	leafValidity = 24 * time.Hour
	// backdate covers clients whose clock runs slightly behind.
	backdate = 5 * time.Minute
)

// Config configures a CA.
type Config struct {
	// Hosts are the intercepted host patterns: "api.example.com",
	// "*.example.com", an IP literal, or "*" for every host.
	Hosts []string
	// Validity is the CA's lifetime from now. Default DefaultValidity.
	Validity time.Duration
	// LeafCache bounds the number of cached leaves. Default
	// DefaultLeafCache.
	LeafCache int
	// Now is the time source. Default time.Now.
	Now func() time.Time
}

// CA is the interception CA. Its methods are safe for concurrent use.
type CA struct {
	hosts    hostSet
	cert     *x509.Certificate
	certDER  []byte
	key      *ecdsa.PrivateKey
	leafKey  *ecdsa.PrivateKey // one key for every leaf: minting is one signature
	now      func() time.Time
	maxCache int

	mu    sync.Mutex
	cache map[string]*list.Element // name -> *leafEntry in order
	order *list.List               // front = most recently used
	mints uint64
}

type leafEntry struct {
	name string
	cert *tls.Certificate
}

// New creates a CA for cfg.Hosts.
func New(cfg Config) (*CA, error) {
	hs, err := parseHosts(cfg.Hosts)
	if err != nil {
		return nil, err
	}
	if cfg.Validity <= 0 {
		cfg.Validity = DefaultValidity
	}
	if cfg.LeafCache <= 0 {
		cfg.LeafCache = DefaultLeafCache
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("mitm: CA key: %w", err)
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("mitm: leaf key: %w", err)
	}
	now := cfg.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "fencepost sidecar interception CA", Organization: []string{"fencepost"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(cfg.Validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	hs.constrain(tmpl)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("mitm: create CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("mitm: parse CA: %w", err)
	}
	return &CA{hosts: hs, cert: cert, certDER: der, key: key, leafKey: leafKey, now: cfg.Now,
		maxCache: cfg.LeafCache, cache: make(map[string]*list.Element), order: list.New()}, nil
}

// Certificate returns the CA certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// CertPEM returns the CA certificate in PEM.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.certDER})
}

// Constrained reports whether the CA carries name constraints (false
// when the host list has "*").
func (ca *CA) Constrained() bool { return !ca.hosts.all }

// Intercepts reports whether host (a name or IP literal, any case, no
// port) is in the CA's host list.
func (ca *CA) Intercepts(host string) bool { return ca.hosts.match(host) }

// Mints returns how many leaves were minted (cache misses), for tests
// and metrics.
func (ca *CA) Mints() uint64 {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	return ca.mints
}

// Leaf returns a certificate for name, minting it on a cache miss. A
// cached leaf past half its lifetime is minted again.
func (ca *CA) Leaf(name string) (*tls.Certificate, error) {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if !ca.hosts.match(name) {
		return nil, fmt.Errorf("%w: %q", ErrNotIntercepted, name)
	}
	now := ca.now()
	ca.mu.Lock()
	if e, ok := ca.cache[name]; ok {
		le := e.Value.(*leafEntry)
		if lt := le.cert.Leaf; now.Before(lt.NotBefore.Add(lt.NotAfter.Sub(lt.NotBefore) / 2)) {
			ca.order.MoveToFront(e)
			ca.mu.Unlock()
			return le.cert, nil
		}
	}
	ca.mu.Unlock()
	c, err := ca.mint(name, now)
	if err != nil {
		return nil, err
	}
	ca.mu.Lock()
	defer ca.mu.Unlock()
	ca.mints++
	if e, ok := ca.cache[name]; ok {
		e.Value.(*leafEntry).cert = c
		ca.order.MoveToFront(e)
		return c, nil
	}
	ca.cache[name] = ca.order.PushFront(&leafEntry{name: name, cert: c})
	for ca.order.Len() > ca.maxCache {
		old := ca.order.Back()
		ca.order.Remove(old)
		delete(ca.cache, old.Value.(*leafEntry).name)
	}
	return c, nil
}

// mint signs a leaf for name. The subject is empty (the name is only in
// the subject alternative names, marked critical), so no verifier reads
// a common name against the CA's DNS constraints.
func (ca *CA) mint(name string, now time.Time) (*tls.Certificate, error) {
	notAfter := now.Add(leafValidity)
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		NotBefore:    now.Add(-backdate),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(strings.Trim(name, "[]")); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{name}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &ca.leafKey.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("mitm: mint leaf for %q: %w", name, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("mitm: parse leaf: %w", err)
	}
	return &tls.Certificate{Certificate: [][]byte{der, ca.certDER}, PrivateKey: ca.leafKey, Leaf: leaf}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic("mitm: crypto/rand failed: " + err.Error()) // the runtime's CSPRNG does not fail
	}
	return n.Add(n, big.NewInt(1))
}
