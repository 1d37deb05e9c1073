// Package pki owns who a TLS peer is: the identity a fencepost certificate
// names (a name and one role) and the rule that reads it; the cluster CA
// and the certificates it issues (ECDSA P-256, keys written 0600, never
// overwritten); a Source that serves an identity's files and reloads them
// when they change; and the TLS 1.3 configurations every role uses (the
// API server's, its clients', the raft port's mutual TLS). It is shared by
// the cluster (raft peers, API callers), the sidecar (its client
// certificate) and the CLI (`fencepost tls`), so each rule is written
// once. Like the rest of fence it has no logging and no raft.
//
// A fencepost certificate carries its identity in the subject:
// CommonName is the name (a member id, a sidecar's worker id, an
// operator's user name) and the first OrganizationalUnit is the role.
package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
)

// Role is what an identity may do; the cluster authorizes every route by it.
type Role string

// The roles. A certificate names exactly one.
const (
	// RoleMember is a cluster member: raft, forwarding between members, join.
	RoleMember Role = "member"
	// RoleSidecar opens sessions bound to its own identity and acts only
	// through them.
	RoleSidecar Role = "sidecar"
	// RoleOperator may revoke, cancel, signal, delete and change membership.
	RoleOperator Role = "operator"
	// RoleReader may list and get (bodies need a separate permission).
	RoleReader Role = "reader"
	// RoleService is a downstream service serving HTTPS under the cluster
	// CA (fenced): a server certificate only, so it can neither call the
	// cluster nor speak raft, and a member's certificate never has to
	// leave the members to give it one.
	RoleService Role = "service"
)

// Roles lists every role, in the order the CLI documents them.
var Roles = []Role{RoleMember, RoleSidecar, RoleOperator, RoleReader, RoleService}

// Sentinel errors of IdentityFromCert; callers match them with errors.Is.
var (
	// ErrNoCertificate: the peer presented no certificate.
	ErrNoCertificate = errors.New("pki: no client certificate")
	// ErrNoName: the certificate's subject has no CommonName.
	ErrNoName = errors.New("pki: certificate names no identity (empty CommonName)")
	// ErrBadRole: the subject's first OrganizationalUnit is not a known role.
	ErrBadRole = errors.New("pki: certificate names no known role (OrganizationalUnit)")
)

// Identity is an authenticated caller: the name its certificate carries and
// its one role.
type Identity struct {
	Name string
	Role Role
}

// String renders "role/name", the form audit logs and problems use.
func (id Identity) String() string { return string(id.Role) + "/" + id.Name }

// Valid reports whether r is one of the defined roles.
func (r Role) Valid() bool {
	for _, k := range Roles {
		if r == k {
			return true
		}
	}
	return false
}

// IdentityFromCert reads the identity of a verified certificate. It does not
// verify the chain: that is the TLS handshake's job (ClientAuth
// RequireAndVerifyClientCert against the cluster CA).
func IdentityFromCert(c *x509.Certificate) (Identity, error) {
	if c == nil {
		return Identity{}, ErrNoCertificate
	}
	if c.Subject.CommonName == "" {
		return Identity{}, ErrNoName
	}
	if len(c.Subject.OrganizationalUnit) == 0 {
		return Identity{}, fmt.Errorf("%w: none", ErrBadRole)
	}
	r := Role(c.Subject.OrganizationalUnit[0])
	if !r.Valid() {
		return Identity{}, fmt.Errorf("%w: %q", ErrBadRole, r)
	}
	return Identity{Name: c.Subject.CommonName, Role: r}, nil
}

// IdentityFromState reads the identity of a connection's verified peer: the
// leaf of the first verified chain, so an unverified certificate is never
// believed.
func IdentityFromState(cs *tls.ConnectionState) (Identity, error) {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return Identity{}, ErrNoCertificate
	}
	return IdentityFromCert(cs.VerifiedChains[0][0])
}
