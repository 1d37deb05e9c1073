package pki_test

import (
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/pki"
	"github.com/fencepost/fencepost/fence/pki/pkitest"
)

// TestRevokedCertificateIsRefusedOnEveryPort: a member loading a list
// that names a certificate refuses it on the raft port and the API, as a
// client or as a server it dials.
func TestRevokedCertificateIsRefusedOnEveryPort(t *testing.T) {
	kit := pkitest.New(t, "cluster")
	bad := kit.Files(pki.RoleMember, "n9", time.Hour)
	badSidecar := kit.Files(pki.RoleSidecar, "w9", time.Hour)
	f := kit.Files(pki.RoleMember, "n1", time.Hour)
	f.CRL = kit.Revoke(bad, badSidecar)
	n1, err := pki.NewSource(f)
	require.NoError(t, err)
	n9, err := pki.NewSource(bad)
	require.NoError(t, err)

	srv, _ := n1.MemberConfigs(nil)
	_, cli := n9.MemberConfigs(nil)
	se, _ := handshake(t, srv, cli("n1:1"))
	require.ErrorIs(t, se, pki.ErrRevoked, "raft refuses a revoked member")

	w9, err := pki.NewSource(badSidecar)
	require.NoError(t, err)
	se, _ = handshake(t, n1.ServerConfig(pki.ClientAuth), w9.ClientConfig("localhost"))
	require.ErrorIs(t, se, pki.ErrRevoked, "the API refuses a revoked sidecar")

	_, ce := handshake(t, n9.ServerConfig(pki.ClientAuth), n1.ClientConfig("localhost"))
	require.ErrorIs(t, ce, pki.ErrRevoked, "a client refuses a revoked server")

	ok := kit.Source(pki.RoleMember, "n2")
	_, cli = ok.MemberConfigs(nil)
	se, ce = handshake(t, srv, cli("n1:1"))
	require.NoError(t, se)
	require.NoError(t, ce, "an unrevoked member is unaffected")
}

func TestRevocationListMustBeSignedByTheCA(t *testing.T) {
	kit, other := pkitest.New(t, "cluster"), pkitest.New(t, "stranger")
	f := kit.Files(pki.RoleMember, "n1", time.Hour)
	f.CRL = other.Revoke(f)
	_, err := pki.NewSource(f)
	require.ErrorIs(t, err, pki.ErrPEM)
	require.ErrorContains(t, err, "not signed by the cluster CA")
}

func TestRevocationListCarriesOverSerials(t *testing.T) {
	kit := pkitest.New(t, "cluster")
	b, err := kit.CA.IssueCRL([]*big.Int{big.NewInt(7), big.NewInt(7), big.NewInt(9)}, big.NewInt(1), time.Now(), time.Hour)
	require.NoError(t, err)
	serials, num, err := pki.ReadCRLSerials(kit.CA, b)
	require.NoError(t, err)
	require.Len(t, serials, 2, "a serial is listed once")
	require.Equal(t, int64(1), num.Int64())
	n, err := pki.ParseSerial("0x0A:0b")
	require.NoError(t, err)
	require.Equal(t, int64(0xa0b), n.Int64())
	_, err = pki.ParseSerial("zz")
	require.ErrorIs(t, err, pki.ErrRequest)
}

func TestSidecarCertificateNamesItsWorkerIDs(t *testing.T) {
	kit := pkitest.New(t, "cluster")
	src, err := pki.NewSource(kit.SidecarFiles("w1", "w1-batch", "w/odd id"))
	require.NoError(t, err)
	require.Equal(t, []string{"w1", "w1-batch", "w/odd id"}, pki.WorkerIDs(src.Current().Leaf))
	plain := kit.Source(pki.RoleSidecar, "w2")
	require.Equal(t, []string{"w2"}, pki.WorkerIDs(plain.Current().Leaf), "by default only its own name")
	_, err = kit.CA.Issue(pki.Request{Name: "op", Role: pki.RoleOperator, Validity: time.Hour, WorkerIDs: []string{"x"}}, time.Now())
	require.ErrorIs(t, err, pki.ErrRequest, "only sidecars carry worker ids")
	for _, bad := range []string{"*", "a*b*", "a*b"} {
		_, err = kit.CA.Issue(pki.Request{Name: "w", Role: pki.RoleSidecar, Validity: time.Hour, WorkerIDs: []string{bad}}, time.Now())
		require.ErrorIs(t, err, pki.ErrRequest, bad)
	}
	pods, err := pki.NewSource(kit.SidecarFiles("example-worker", "example-worker-*"))
	require.NoError(t, err)
	ids := pki.WorkerIDs(pods.Current().Leaf)
	require.True(t, pki.MayUseWorker(ids, "example-worker-7d9f-x2"), "a pod of the Deployment")
	require.True(t, pki.MayUseWorker(ids, "example-worker"))
	require.False(t, pki.MayUseWorker(ids, "other-worker"))
	require.False(t, pki.MayUseWorker([]string{"w1"}, "w1x"), "an exact id is no prefix")
}
