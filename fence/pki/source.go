package pki

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync"
	"time"
)

// Files names the PEM files of one identity: the cluster CA certificate(s)
// it trusts and its own certificate and key.
type Files struct {
	CA   string
	Cert string
	Key  string
	// CRL, when set, is a revocation list signed by the CA (`fencepost
	// tls crl create`): a peer presenting a listed serial is refused on
	// every port. It is reloaded like the other files.
	CRL string
}

// ReloadCheck is how often a Source looks at its files' modification times;
// a rotated certificate is in use at most this long after it was written.
const ReloadCheck = time.Second

// Source serves an identity's current certificate and trusted CA pool,
// reading the files again when one changes (size or modification time),
// so a rotated certificate (cert-manager renewing a Secret) is picked up
// without a restart. A reload that fails keeps the previous material and
// is reported by LastError. Safe for concurrent use.
type Source struct {
	files  Files
	now    func() time.Time
	static bool

	mu      sync.Mutex
	cur     *Material
	stamps  [4]stamp
	checked time.Time
	lastErr error
}

// Material is one loaded generation of a Source.
type Material struct {
	// Cert is the identity's certificate chain and key.
	Cert *tls.Certificate
	// Leaf is Cert's parsed leaf; Identity is the identity it names.
	Leaf     *x509.Certificate
	Identity Identity
	// Pool holds the trusted CA certificates.
	Pool *x509.CertPool
	// revoked is the serials of Files.CRL (nil without one).
	revoked revoked
}

type stamp struct {
	size int64
	mod  time.Time
}

// NewSource loads files once and returns a Source serving them. Cert and
// Key must name an identity (CommonName and role); CA is required.
func NewSource(files Files) (*Source, error) {
	s := &Source{files: files, now: time.Now}
	m, st, err := load(files)
	if err != nil {
		return nil, err
	}
	s.cur, s.stamps, s.checked = m, st, s.now()
	return s, nil
}

// Files returns the paths the Source reads.
func (s *Source) Files() Files { return s.files }

// Current returns the current material, reloading it first when a file
// changed since the last look (at most every ReloadCheck).
func (s *Source) Current() *Material {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.static || now.Sub(s.checked) < ReloadCheck {
		return s.cur
	}
	s.checked = now
	st, err := stat(s.files)
	if err != nil {
		s.lastErr = err
		return s.cur
	}
	if st == s.stamps {
		return s.cur
	}
	m, st, err := load(s.files)
	if err != nil {
		s.lastErr = err
		return s.cur
	}
	s.cur, s.stamps, s.lastErr = m, st, nil
	return s.cur
}

// LastError returns the error of the last failed reload, nil after a
// successful one.
func (s *Source) LastError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}

func stat(f Files) ([4]stamp, error) {
	var st [4]stamp
	for i, p := range []string{f.CA, f.Cert, f.Key, f.CRL} {
		if p == "" {
			continue // no CRL
		}
		fi, err := os.Stat(p)
		if err != nil {
			return st, fmt.Errorf("pki: %w", err)
		}
		st[i] = stamp{size: fi.Size(), mod: fi.ModTime()}
	}
	return st, nil
}

func load(f Files) (*Material, [4]stamp, error) {
	st, err := stat(f)
	if err != nil {
		return nil, st, err
	}
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, st, fmt.Errorf("pki: read CA: %w", err)
	}
	certPEM, err := os.ReadFile(f.Cert)
	if err != nil {
		return nil, st, fmt.Errorf("pki: read certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(f.Key)
	if err != nil {
		return nil, st, fmt.Errorf("pki: read key: %w", err)
	}
	m, err := NewMaterial(caPEM, certPEM, keyPEM)
	if err != nil || f.CRL == "" {
		return m, st, err
	}
	crlPEM, err := os.ReadFile(f.CRL)
	if err != nil {
		return nil, st, fmt.Errorf("pki: read revocation list: %w", err)
	}
	if m.revoked, err = parseCRL(caPEM, crlPEM); err != nil {
		return nil, st, err
	}
	return m, st, nil
}

// LoadPool reads a CA bundle file into a pool, for a client that only
// verifies the cluster (fetching public keys) and presents no identity.
func LoadPool(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pki: read CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%w: %s holds no CA certificate", ErrPEM, path)
	}
	return pool, nil
}

// NewMaterial builds Material from PEM bytes (files, or a test's memory).
func NewMaterial(caPEM, certPEM, keyPEM []byte) (*Material, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%w: no CA certificate", ErrPEM)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%w: certificate and key: %v", ErrPEM, err)
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrPEM, err)
		}
	}
	id, err := IdentityFromCert(leaf)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(leaf.RawIssuer, leaf.RawSubject) && leaf.IsCA {
		return nil, fmt.Errorf("%w: the certificate is a CA, not an identity", ErrBadRole)
	}
	return &Material{Cert: &pair, Leaf: leaf, Identity: id, Pool: pool}, nil
}

// StaticSource returns a Source that always serves m (tests, and callers
// that hold PEM in memory). It never reloads.
func StaticSource(m *Material) *Source {
	return &Source{cur: m, now: time.Now, static: true}
}
