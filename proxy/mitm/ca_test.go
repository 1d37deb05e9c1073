package mitm

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func pool(ca *CA) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Certificate())
	return p
}

func TestLeafVerifiesForInterceptedHostsOnly(t *testing.T) {
	ca, err := New(Config{Hosts: []string{"api.example.com", "*.corp.test", "127.0.0.1"}})
	require.NoError(t, err)
	require.True(t, ca.Constrained())
	require.Equal(t, x509.ECDSA, ca.Certificate().PublicKeyAlgorithm)
	for _, name := range []string{"api.example.com", "x.corp.test", "127.0.0.1"} {
		c, err := ca.Leaf(name)
		require.NoError(t, err, name)
		opts := x509.VerifyOptions{Roots: pool(ca), DNSName: name}
		_, err = c.Leaf.Verify(opts)
		require.NoError(t, err, name)
		require.LessOrEqual(t, time.Until(c.Leaf.NotAfter), leafValidity)
	}
	for _, name := range []string{"evil.com", "corp.test", "10.0.0.1", "API.EXAMPLE.COM.evil"} {
		_, err := ca.Leaf(name)
		require.ErrorIs(t, err, ErrNotIntercepted, name)
	}
}

// TestNameConstraintsStopALeakedKey signs certificates with the CA key
// directly, as someone holding a leaked key would: verifiers reject
// every name outside the host list, DNS and IP alike.
func TestNameConstraintsStopALeakedKey(t *testing.T) {
	ca, err := New(Config{Hosts: []string{"api.example.com"}})
	require.NoError(t, err)
	for _, tc := range []struct {
		dns string
		ip  net.IP
	}{{dns: "bank.example.org"}, {dns: "example.com"}, {ip: net.ParseIP("10.1.2.3")}} {
		tmpl := &x509.Certificate{SerialNumber: serial(), NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		name := tc.dns
		if tc.ip != nil {
			tmpl.IPAddresses, name = []net.IP{tc.ip}, tc.ip.String()
		} else {
			tmpl.DNSNames = []string{tc.dns}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cur.cert, &ca.leafKey.PublicKey, ca.cur.key)
		require.NoError(t, err)
		leaf, err := x509.ParseCertificate(der)
		require.NoError(t, err)
		_, err = leaf.Verify(x509.VerifyOptions{Roots: pool(ca), DNSName: name})
		var ce x509.CertificateInvalidError
		require.True(t, errors.As(err, &ce), "%s: %v", name, err)
		require.Equal(t, x509.CANotAuthorizedForThisName, ce.Reason, name)
	}
}

func TestWildcardCAIsUnconstrained(t *testing.T) {
	ca, err := New(Config{Hosts: []string{"*"}})
	require.NoError(t, err)
	require.False(t, ca.Constrained())
	require.True(t, ca.Intercepts("anything.example"))
	c, err := ca.Leaf("anything.example")
	require.NoError(t, err)
	_, err = c.Leaf.Verify(x509.VerifyOptions{Roots: pool(ca), DNSName: "anything.example"})
	require.NoError(t, err)
}

func TestLeafCacheIsBoundedAndReused(t *testing.T) {
	ca, err := New(Config{Hosts: []string{"*"}, LeafCache: 2})
	require.NoError(t, err)
	a1, err := ca.Leaf("a.test")
	require.NoError(t, err)
	a2, err := ca.Leaf("A.test.")
	require.NoError(t, err)
	require.Same(t, a1, a2)
	require.EqualValues(t, 1, ca.Mints())
	for _, n := range []string{"b.test", "c.test"} {
		_, err = ca.Leaf(n)
		require.NoError(t, err)
	}
	require.Equal(t, 2, ca.order.Len())
	a3, err := ca.Leaf("a.test") // evicted: minted again
	require.NoError(t, err)
	require.NotSame(t, a1, a3)
	require.EqualValues(t, 4, ca.Mints())
}

func TestLeafRenewedPastHalfLife(t *testing.T) {
	now := time.Now()
	ca, err := New(Config{Hosts: []string{"*"}, Now: func() time.Time { return now }})
	require.NoError(t, err)
	a1, err := ca.Leaf("a.test")
	require.NoError(t, err)
	now = now.Add(leafValidity / 2)
	a2, err := ca.Leaf("a.test")
	require.NoError(t, err)
	require.NotSame(t, a1, a2)
}

func TestLeafNeverOutlivesCA(t *testing.T) {
	ca, err := New(Config{Hosts: []string{"*"}, Validity: time.Hour})
	require.NoError(t, err)
	c, err := ca.Leaf("a.test")
	require.NoError(t, err)
	require.False(t, c.Leaf.NotAfter.After(ca.Certificate().NotAfter))
}

func TestBadHostLists(t *testing.T) {
	for _, hs := range [][]string{nil, {"bad host"}, {"*."}, {"a..b"}, {"ex ample.com"}} {
		_, err := New(Config{Hosts: hs})
		require.ErrorIs(t, err, ErrInvalidHost, "%q", hs)
	}
}

func TestBundleHoldsSystemRootsAndCA(t *testing.T) {
	ca, err := New(Config{Hosts: []string{"*"}})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "bundle.pem")
	require.NoError(t, ca.WriteBundle(path))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), st.Mode().Perm())
	var n int
	var found bool
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		n++
		found = found || string(blk.Bytes) == string(ca.Certificate().Raw)
	}
	require.True(t, found, "the bundle lacks the CA")
	if SystemRootsPEM() != nil {
		require.Greater(t, n, 1, "the bundle lacks the system roots")
	}
	require.NotContains(t, string(b), "PRIVATE KEY")
}

// handshake runs a TLS handshake between a client naming sni (and
// offering alpn) and the CA's server config for connectHost.
func handshake(t *testing.T, ca *CA, connectHost, sni string, alpn []string) (tls.ConnectionState, error, error) {
	t.Helper()
	a, b := net.Pipe()
	defer func() { _, _ = a.Close(), b.Close() }()
	srvErr := make(chan error, 1)
	go func() {
		s := tls.Server(b, ca.ServerConfig(connectHost))
		srvErr <- s.Handshake()
		_ = b.Close()
	}()
	c := tls.Client(a, &tls.Config{RootCAs: pool(ca), ServerName: sni, NextProtos: alpn, InsecureSkipVerify: sni == ""})
	cerr := c.Handshake()
	_ = a.Close()
	return c.ConnectionState(), cerr, <-srvErr
}

func TestServerConfigChecksSNIAndOffersHTTP1Only(t *testing.T) {
	ca, err := New(Config{Hosts: []string{"*"}})
	require.NoError(t, err)
	st, cerr, serr := handshake(t, ca, "api.test", "api.test", []string{"h2", "http/1.1"})
	require.NoError(t, cerr)
	require.NoError(t, serr)
	require.Equal(t, "http/1.1", st.NegotiatedProtocol)

	_, cerr, serr = handshake(t, ca, "api.test", "other.test", nil)
	require.Error(t, cerr)
	require.ErrorIs(t, serr, ErrSNIMismatch)

	// No SNI (an IP literal, or a client that omits it): the CONNECT host.
	st, cerr, serr = handshake(t, ca, "127.0.0.1", "", nil)
	require.NoError(t, cerr)
	require.NoError(t, serr)
	require.Equal(t, []net.IP{net.ParseIP("127.0.0.1").To4()}, st.PeerCertificates[0].IPAddresses)

	_, cerr, _ = handshake(t, ca, "api.test", "api.test", []string{"h2"})
	require.Error(t, cerr, "an h2-only client must not get a tunnel it would speak HTTP/2 in")
}
