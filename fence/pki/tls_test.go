package pki_test

import (
	"crypto/tls"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/pki"
	"github.com/fencepost/fencepost/fence/pki/pkitest"
)

func TestIssuedCertificateCarriesIdentityAndKeyIsPrivate(t *testing.T) {
	kit := pkitest.New(t, "test-ca")
	f := kit.Files(pki.RoleMember, "n1", time.Hour)
	fi, err := os.Stat(f.Key)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "keys are written 0600")
	src, err := pki.NewSource(f)
	require.NoError(t, err)
	m := src.Current()
	require.Equal(t, pki.Identity{Name: "n1", Role: pki.RoleMember}, m.Identity)
	require.Contains(t, m.Leaf.DNSNames, "n1", "a member's name is one of its SANs")
}

func TestWritePairNeverReplacesAFile(t *testing.T) {
	dir := t.TempDir()
	_, pair, err := pki.NewCA("ca", time.Now(), time.Hour)
	require.NoError(t, err)
	_, _, err = pki.WritePair(dir, "a.pem", "a-key.pem", pair)
	require.NoError(t, err)
	_, _, err = pki.WritePair(dir, "a.pem", "a-key.pem", pair)
	require.ErrorIs(t, err, pki.ErrExists)
}

func TestIssueRefusesIncompleteRequests(t *testing.T) {
	ca, _, err := pki.NewCA("ca", time.Now(), time.Hour)
	require.NoError(t, err)
	for _, r := range []pki.Request{
		{Role: pki.RoleMember, Validity: time.Hour},
		{Name: "x", Role: "admin", Validity: time.Hour},
		{Name: "x", Role: pki.RoleReader},
	} {
		_, err := ca.Issue(r, time.Now())
		require.ErrorIs(t, err, pki.ErrRequest, "%+v", r)
	}
}

// handshake runs one TLS handshake over loopback and returns both sides'
// errors.
func handshake(t *testing.T, server, client *tls.Config) (srvErr, cliErr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		tc := tls.Server(c, server)
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		if err := tc.Handshake(); err != nil {
			done <- err
			return
		}
		// TLS 1.3 finishes the client's handshake before the server has
		// read its certificate; a read makes the server's verdict reach it.
		_, err = tc.Write([]byte{1})
		done <- err
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), client)
	if err == nil {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = c.Read(make([]byte, 1))
		_ = c.Close()
	}
	return <-done, err
}

func TestMemberHandshakeChecksRoleNameAndCA(t *testing.T) {
	kit := pkitest.New(t, "cluster")
	n1, n2 := kit.Source(pki.RoleMember, "n1"), kit.Source(pki.RoleMember, "n2")
	srv, _ := n1.MemberConfigs(nil)
	_, cli := n2.MemberConfigs(func(string) string { return "n1" })
	se, ce := handshake(t, srv, cli("n1:1"))
	require.NoError(t, se)
	require.NoError(t, ce)

	t.Run("another member's name at the dialed address", func(t *testing.T) {
		_, cli := n2.MemberConfigs(func(string) string { return "n3" })
		_, ce := handshake(t, srv, cli("n3:1"))
		require.ErrorIs(t, ce, pki.ErrWrongName)
	})
	t.Run("a sidecar certificate on the raft port", func(t *testing.T) {
		_, cli := kit.Source(pki.RoleSidecar, "w1").MemberConfigs(nil)
		se, _ := handshake(t, srv, cli("n1:1"))
		require.ErrorIs(t, se, pki.ErrWrongRole)
	})
	t.Run("a certificate from another CA", func(t *testing.T) {
		_, cli := pkitest.New(t, "stranger").Source(pki.RoleMember, "n1").MemberConfigs(nil)
		se, ce := handshake(t, srv, cli("n1:1"))
		require.Error(t, se)
		require.Error(t, ce, "the stranger does not trust our CA either")
	})
	t.Run("an expired certificate", func(t *testing.T) {
		src, err := pki.NewSource(kit.Files(pki.RoleMember, "n2", -time.Hour))
		require.NoError(t, err)
		_, cli := src.MemberConfigs(nil)
		se, _ := handshake(t, srv, cli("n1:1"))
		require.ErrorContains(t, se, "expired")
	})
	t.Run("no certificate", func(t *testing.T) {
		se, _ := handshake(t, srv, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the stranger
		require.Error(t, se)
	})
	t.Run("a service certificate on the raft port", func(t *testing.T) {
		_, cli := kit.Source(pki.RoleService, "fenced").MemberConfigs(nil)
		se, _ := handshake(t, srv, cli("n1:1"))
		require.Error(t, se, "a server-only certificate cannot authenticate a client")
	})
}

// TestServiceCertificateServesButNeverAuthenticatesAClient: a service
// certificate (fenced's) is valid for its name as a server, and refused as
// a client by the cluster API, which asks for client certificates.
func TestServiceCertificateServesButNeverAuthenticatesAClient(t *testing.T) {
	kit := pkitest.New(t, "cluster")
	svc := kit.Source(pki.RoleService, "fenced")
	reader := kit.Source(pki.RoleReader, "dash")
	se, ce := handshake(t, svc.ServerConfig(tls.NoClientCert), reader.ClientConfig("fenced"))
	require.NoError(t, se)
	require.NoError(t, ce, "the service's certificate names it")

	api := kit.Source(pki.RoleMember, "n1").ServerConfig(tls.RequireAndVerifyClientCert)
	se, _ = handshake(t, api, svc.ClientConfig("localhost"))
	require.Error(t, se, "the API refuses a service certificate as a client")
}

func TestClientConfigVerifiesServerHostName(t *testing.T) {
	kit := pkitest.New(t, "cluster")
	srv := kit.Source(pki.RoleMember, "n1").ServerConfig(pki.ClientAuth)
	cli := kit.Source(pki.RoleSidecar, "w1").ClientConfig("localhost")
	_, ce := handshake(t, srv, cli)
	require.NoError(t, ce)
	_, ce = handshake(t, srv, kit.Source(pki.RoleSidecar, "w1").ClientConfig("elsewhere.example"))
	require.ErrorContains(t, ce, "elsewhere.example")
}

func TestSourceReloadsRotatedCertificate(t *testing.T) {
	kit := pkitest.New(t, "cluster")
	f := kit.Files(pki.RoleSidecar, "w1", time.Hour)
	src, err := pki.NewSource(f)
	require.NoError(t, err)
	first := src.Current().Leaf.SerialNumber
	g := kit.Files(pki.RoleSidecar, "w1", time.Hour)
	for _, p := range [][2]string{{g.Cert, f.Cert}, {g.Key, f.Key}} {
		b, err := os.ReadFile(p[0])
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(p[1]+".new", b, 0o600))
		require.NoError(t, os.Rename(p[1]+".new", p[1]))
	}
	require.Eventually(t, func() bool { return src.Current().Leaf.SerialNumber.Cmp(first) != 0 },
		10*time.Second, 50*time.Millisecond, "the rotated certificate is served without a restart")
	require.NoError(t, src.LastError())

	require.NoError(t, os.WriteFile(f.Cert, []byte("garbage"), 0o600))
	require.Eventually(t, func() bool { src.Current(); return src.LastError() != nil }, 10*time.Second, 50*time.Millisecond)
	require.NotNil(t, src.Current().Cert, "a broken file keeps the last good certificate")
}
