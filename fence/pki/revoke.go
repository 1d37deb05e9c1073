package pki

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"strings"
	"time"
)

// ErrRevoked: the peer's certificate serial is on the cluster's
// revocation list (Files.CRL). Every port refuses it: raft, the API, a
// sidecar's cluster client.
var ErrRevoked = errors.New("pki: certificate revoked")

// CRLFile is the name `fencepost tls crl create` writes by default.
const CRLFile = "crl.pem"

// DefaultCRLValidity is the NextUpdate of an issued list. Members apply a
// list's revocations whatever its NextUpdate (a revocation never lapses);
// the field only tells other tools when to look for a newer list.
const DefaultCRLValidity = 30 * 24 * time.Hour

// revoked is a set of serial numbers in lower-case hex.
type revoked map[string]struct{}

func serialKey(n *big.Int) string { return n.Text(16) }

// Revoked reports whether a certificate's serial is on m's revocation list.
func (m *Material) Revoked(c *x509.Certificate) bool {
	if m == nil || c == nil || len(m.revoked) == 0 {
		return false
	}
	_, ok := m.revoked[serialKey(c.SerialNumber)]
	return ok
}

// checkPeer is the revocation check every VerifyConnection runs on the
// peer's leaf.
func (m *Material) checkPeer(certs []*x509.Certificate) error {
	if len(certs) > 0 && m.Revoked(certs[0]) {
		return fmt.Errorf("%w: %q (serial %s)", ErrRevoked, certs[0].Subject.CommonName, serialKey(certs[0].SerialNumber))
	}
	return nil
}

// parseCRL reads a PEM X509 CRL and checks it is signed by one of the CA
// certificates in caPEM, so only the CA's key can revoke.
func parseCRL(caPEM, crlPEM []byte) (revoked, error) {
	blk, _ := pem.Decode(crlPEM)
	if blk == nil || blk.Type != "X509 CRL" {
		return nil, fmt.Errorf("%w: no X509 CRL block in the revocation list", ErrPEM)
	}
	rl, err := x509.ParseRevocationList(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: revocation list: %v", ErrPEM, err)
	}
	var sigErr error = fmt.Errorf("%w: the revocation list is not signed by the cluster CA", ErrPEM)
	for rest := caPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		ca, err := x509.ParseCertificate(b.Bytes)
		if err == nil && rl.CheckSignatureFrom(ca) == nil {
			sigErr = nil
			break
		}
	}
	if sigErr != nil {
		return nil, sigErr
	}
	out := make(revoked, len(rl.RevokedCertificateEntries))
	for _, e := range rl.RevokedCertificateEntries {
		out[serialKey(e.SerialNumber)] = struct{}{}
	}
	return out, nil
}

// ParseSerial reads a serial number as `openssl x509 -serial` or
// `fencepost tls crl create` prints it: hex, colons and a 0x prefix allowed.
func ParseSerial(s string) (*big.Int, error) {
	h := strings.TrimPrefix(strings.ToLower(strings.ReplaceAll(strings.TrimSpace(s), ":", "")), "0x")
	n, ok := new(big.Int).SetString(h, 16)
	if !ok || n.Sign() <= 0 {
		return nil, fmt.Errorf("%w: serial %q is not a positive hex number", ErrRequest, s)
	}
	return n, nil
}

// CertSerial reads the serial of a PEM certificate file.
func CertSerial(path string) (*big.Int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pki: read certificate: %w", err)
	}
	c, err := parseCert(b)
	if err != nil {
		return nil, err
	}
	return c.SerialNumber, nil
}

// ReadCRLSerials returns the serials of an existing list signed by ca, so
// a new list can carry them over (a list only grows).
func ReadCRLSerials(ca *CA, crlPEM []byte) ([]*big.Int, *big.Int, error) {
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
	if _, err := parseCRL(caPEM, crlPEM); err != nil {
		return nil, nil, err
	}
	blk, _ := pem.Decode(crlPEM)
	rl, _ := x509.ParseRevocationList(blk.Bytes) // parsed above
	out := make([]*big.Int, 0, len(rl.RevokedCertificateEntries))
	for _, e := range rl.RevokedCertificateEntries {
		out = append(out, e.SerialNumber)
	}
	return out, rl.Number, nil
}

// IssueCRL signs a revocation list of serials with number (which must
// grow from one list to the next), valid from now for validity.
func (ca *CA) IssueCRL(serials []*big.Int, number *big.Int, now time.Time, validity time.Duration) ([]byte, error) {
	if number == nil || number.Sign() <= 0 || validity <= 0 {
		return nil, fmt.Errorf("%w: a revocation list needs a positive number and validity", ErrRequest)
	}
	seen := map[string]bool{}
	tmpl := &x509.RevocationList{Number: number, ThisUpdate: now.Add(-clockSkew), NextUpdate: now.Add(validity)}
	for _, s := range serials {
		if seen[serialKey(s)] {
			continue
		}
		seen[serialKey(s)] = true
		tmpl.RevokedCertificateEntries = append(tmpl.RevokedCertificateEntries,
			x509.RevocationListEntry{SerialNumber: s, RevocationTime: now})
	}
	der, err := x509.CreateRevocationList(rand.Reader, tmpl, ca.Cert, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("pki: sign revocation list: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der}), nil
}
