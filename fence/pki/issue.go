package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"
)

// Defaults for issued certificates.
const (
	// DefaultCAValidity is how long a new cluster CA is valid (5 years).
	DefaultCAValidity = 5 * 365 * 24 * time.Hour
	// DefaultCertValidity is how long a role certificate is valid (1 year).
	DefaultCertValidity = 365 * 24 * time.Hour
	// clockSkew back-dates NotBefore, so a peer whose clock is a little
	// behind does not refuse a certificate issued a second ago.
	clockSkew = 5 * time.Minute
)

// Sentinel errors of issuing and loading; callers match them with errors.Is.
var (
	// ErrRequest: an issue request is incomplete or contradictory.
	ErrRequest = errors.New("pki: invalid certificate request")
	// ErrPEM: a file holds no usable PEM block of the expected kind.
	ErrPEM = errors.New("pki: bad PEM")
)

// CA is a certificate authority: its certificate and private key.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// Pair is an issued certificate and its private key, PEM encoded.
type Pair struct {
	CertPEM []byte
	KeyPEM  []byte
}

// NewCA creates a self-signed ECDSA P-256 CA named name, valid from now
// for validity. The CA may only sign leaves (path length 0).
func NewCA(name string, now time.Time, validity time.Duration) (*CA, Pair, error) {
	if name == "" || validity <= 0 {
		return nil, Pair{}, fmt.Errorf("%w: a CA needs a name and a positive validity", ErrRequest)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, Pair{}, fmt.Errorf("pki: generate CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: name, Organization: []string{"fencepost"}},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
		SubjectKeyId:          keyID(&key.PublicKey),
	}
	pair, cert, err := sign(tmpl, tmpl, key, key)
	if err != nil {
		return nil, Pair{}, err
	}
	return &CA{Cert: cert, Key: key}, pair, nil
}

// Request names the certificate to issue.
type Request struct {
	// Name is the identity (CommonName): a member id, a worker id, a user.
	Name string
	// Role is the first OrganizationalUnit.
	Role Role
	// DNSNames and IPs are extra subject alternative names; a member's
	// certificate also serves the API, so clients verify them.
	DNSNames []string
	IPs      []net.IP
	// WorkerIDs are the worker ids a sidecar certificate may open
	// sessions under besides its own name (SAN URIs, WorkerIDs).
	WorkerIDs []string
	// Validity is how long the certificate is valid from now.
	Validity time.Duration
}

// Issue signs a new ECDSA P-256 key for req. A member certificate may
// serve (ServerAuth) and dial (ClientAuth); every other role only dials.
// A member's SANs always include its name, so a peer may verify a member
// by the name it claims.
func (ca *CA) Issue(req Request, now time.Time) (Pair, error) {
	switch {
	case req.Name == "":
		return Pair{}, fmt.Errorf("%w: name is empty", ErrRequest)
	case !req.Role.Valid():
		return Pair{}, fmt.Errorf("%w: role %q is not one of %v", ErrRequest, req.Role, Roles)
	case req.Validity <= 0:
		return Pair{}, fmt.Errorf("%w: validity must be positive", ErrRequest)
	}
	uris, err := workerSANs(req)
	if err != nil {
		return Pair{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("pki: generate key: %w", err)
	}
	tmpl := &x509.Certificate{ // sign draws the serial number
		URIs: uris,
		Subject: pkix.Name{CommonName: req.Name, OrganizationalUnit: []string{string(req.Role)},
			Organization: []string{"fencepost"}},
		NotBefore:      now.Add(-clockSkew),
		NotAfter:       now.Add(req.Validity),
		KeyUsage:       x509.KeyUsageDigitalSignature,
		ExtKeyUsage:    []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		DNSNames:       req.DNSNames,
		IPAddresses:    req.IPs,
		AuthorityKeyId: ca.Cert.SubjectKeyId,
	}
	switch req.Role {
	case RoleMember:
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	case RoleService:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	if (req.Role == RoleMember || req.Role == RoleService) && !slices.Contains(tmpl.DNSNames, req.Name) && net.ParseIP(req.Name) == nil {
		tmpl.DNSNames = append([]string{req.Name}, tmpl.DNSNames...)
	}
	if now.Add(req.Validity).After(ca.Cert.NotAfter) {
		tmpl.NotAfter = ca.Cert.NotAfter
	}
	pair, _, err := sign(tmpl, ca.Cert, key, ca.Key)
	return pair, err
}

// sign creates the certificate and PEM-encodes it with the new key.
func sign(tmpl, parent *x509.Certificate, key *ecdsa.PrivateKey, signer crypto.Signer) (Pair, *x509.Certificate, error) {
	if tmpl.SerialNumber == nil {
		serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
		if err != nil {
			return Pair{}, nil, fmt.Errorf("pki: serial: %w", err)
		}
		tmpl.SerialNumber = serial
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		return Pair{}, nil, fmt.Errorf("pki: sign certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return Pair{}, nil, fmt.Errorf("pki: parse issued certificate: %w", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Pair{}, nil, fmt.Errorf("pki: encode key: %w", err)
	}
	return Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
	}, cert, nil
}

// keyID is the SHA-256 of the public key, truncated as RFC 7093 allows.
func keyID(pub *ecdsa.PublicKey) []byte {
	der, _ := x509.MarshalPKIXPublicKey(pub)
	sum := sha256.Sum256(der)
	return sum[:20]
}

// ParseCA reads a CA from its PEM certificate and PEM PKCS #8 key.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	cert, err := parseCert(certPEM)
	if err != nil {
		return nil, err
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("%w: %s is not a CA certificate", ErrPEM, cert.Subject.CommonName)
	}
	blk, _ := pem.Decode(keyPEM)
	if blk == nil {
		return nil, fmt.Errorf("%w: no PEM block in the CA key", ErrPEM)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: CA key: %v", ErrPEM, err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%w: CA key of type %T cannot sign", ErrPEM, k)
	}
	return &CA{Cert: cert, Key: signer}, nil
}

func parseCert(b []byte) (*x509.Certificate, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%w: no CERTIFICATE block", ErrPEM)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPEM, err)
	}
	return c, nil
}
