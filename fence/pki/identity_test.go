package pki

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestIdentityFromCertReadsNameAndRole(t *testing.T) {
	c := &x509.Certificate{Subject: pkix.Name{CommonName: "w1", OrganizationalUnit: []string{"sidecar"}}}
	id, err := IdentityFromCert(c)
	require.NoError(t, err)
	require.Equal(t, Identity{Name: "w1", Role: RoleSidecar}, id)
	require.Equal(t, "sidecar/w1", id.String())
}

func TestIdentityFromCertRefusesWhatNamesNoIdentity(t *testing.T) {
	_, err := IdentityFromCert(nil)
	require.ErrorIs(t, err, ErrNoCertificate)
	_, err = IdentityFromCert(&x509.Certificate{Subject: pkix.Name{OrganizationalUnit: []string{"member"}}})
	require.ErrorIs(t, err, ErrNoName)
	_, err = IdentityFromCert(&x509.Certificate{Subject: pkix.Name{CommonName: "n1"}})
	require.ErrorIs(t, err, ErrBadRole)
	_, err = IdentityFromCert(&x509.Certificate{Subject: pkix.Name{CommonName: "n1", OrganizationalUnit: []string{"admin"}}})
	require.ErrorIs(t, err, ErrBadRole)
}

func TestIdentityFromStateBelievesOnlyVerifiedChains(t *testing.T) {
	leaf := &x509.Certificate{Subject: pkix.Name{CommonName: "op", OrganizationalUnit: []string{"operator"}}}
	_, err := IdentityFromState(&tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}})
	require.ErrorIs(t, err, ErrNoCertificate, "a presented but unverified certificate is not an identity")
	id, err := IdentityFromState(&tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{leaf}}})
	require.NoError(t, err)
	require.Equal(t, RoleOperator, id.Role)
}
