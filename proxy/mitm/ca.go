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

// CA is the interception CA. Its methods are safe for concurrent use. It
// has one signing generation (cur) and, while it renews (renew.go), the
// next one it announced and the previous one it still lists in the bundle.
type CA struct {
	hosts    hostSet
	leafKey  *ecdsa.PrivateKey // one key for every leaf: minting is one signature
	now      func() time.Time
	maxCache int
	validity time.Duration

	mu    sync.Mutex
	cur   *generation              // signs leaves
	next  *generation              // announced in the bundle, signing from the switch on
	prev  *generation              // signed until the switch; listed until it expires
	cache map[string]*list.Element // name -> *leafEntry in order
	order *list.List               // front = most recently used
	mints uint64
	// published: a bundle listing next was written (Renew switches only
	// then).
	published bool
}

// generation is one CA certificate and its key.
type generation struct {
	cert *x509.Certificate
	der  []byte
	key  *ecdsa.PrivateKey
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
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("mitm: leaf key: %w", err)
	}
	ca := &CA{hosts: hs, leafKey: leafKey, now: cfg.Now, validity: cfg.Validity,
		maxCache: cfg.LeafCache, cache: make(map[string]*list.Element), order: list.New()}
	if ca.cur, err = ca.newGeneration(cfg.Now()); err != nil {
		return nil, err
	}
	return ca, nil
}

// newGeneration creates a CA certificate and key valid from now for the
// CA's validity, with the host list's name constraints.
func (ca *CA) newGeneration(now time.Time) (*generation, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("mitm: CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "fencepost sidecar interception CA", Organization: []string{"fencepost"}, SerialNumber: now.UTC().Format("20060102T150405.000000000Z")},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(ca.validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	ca.hosts.constrain(tmpl)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("mitm: create CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("mitm: parse CA: %w", err)
	}
	return &generation{cert: cert, der: der, key: key}, nil
}

// Certificate returns the CA certificate that signs leaves now.
func (ca *CA) Certificate() *x509.Certificate {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	return ca.cur.cert
}

// CertPEM returns, in PEM, every CA certificate a client should trust
// now: the signing one, the next one once announced, and the previous one
// until it expires (renew.go), so a bundle written at any time verifies
// every leaf served until the bundle after it.
func (ca *CA) CertPEM() []byte {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	var out []byte
	for _, g := range ca.trustedLocked(ca.now()) {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: g.der})...)
	}
	return out
}

// trustedLocked lists the generations CertPEM returns. The caller holds mu.
func (ca *CA) trustedLocked(now time.Time) []*generation {
	var out []*generation
	if ca.prev != nil && now.Before(ca.prev.cert.NotAfter) {
		out = append(out, ca.prev)
	}
	out = append(out, ca.cur)
	if ca.next != nil {
		out = append(out, ca.next)
	}
	return out
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
	gen := ca.cur
	ca.mu.Unlock()
	c, err := ca.mint(gen, name, now)
	if err != nil {
		return nil, err
	}
	ca.mu.Lock()
	defer ca.mu.Unlock()
	ca.mints++
	if gen != ca.cur {
		return c, nil // the CA switched meanwhile: do not cache the old one's leaf
	}
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
func (ca *CA) mint(gen *generation, name string, now time.Time) (*tls.Certificate, error) {
	notAfter := now.Add(leafValidity)
	if notAfter.After(gen.cert.NotAfter) {
		notAfter = gen.cert.NotAfter
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
	der, err := x509.CreateCertificate(rand.Reader, tmpl, gen.cert, &ca.leafKey.PublicKey, gen.key)
	if err != nil {
		return nil, fmt.Errorf("mitm: mint leaf for %q: %w", name, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("mitm: parse leaf: %w", err)
	}
	return &tls.Certificate{Certificate: [][]byte{der, gen.der}, PrivateKey: ca.leafKey, Leaf: leaf}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic("mitm: crypto/rand failed: " + err.Error()) // the runtime's CSPRNG does not fail
	}
	return n.Add(n, big.NewInt(1))
}
