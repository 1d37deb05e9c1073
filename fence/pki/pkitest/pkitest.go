// Package pkitest gives tests a throwaway cluster CA and identities
// issued by it, written to a test's temporary directory, so every package
// that speaks TLS tests against the same certificates production uses.
package pkitest

import (
	"crypto/tls"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/pki"
)

// Kit is a CA in a temporary directory.
type Kit struct {
	// CA is the authority; CAFile its certificate on disk.
	CA     *pki.CA
	CAFile string
	Dir    string
	t      testing.TB
}

// New creates a CA named name valid for a day.
func New(t testing.TB, name string) *Kit {
	t.Helper()
	dir := t.TempDir()
	ca, pair, err := pki.NewCA(name, time.Now(), 24*time.Hour)
	require.NoError(t, err)
	caFile := filepath.Join(dir, pki.CAFile)
	require.NoError(t, os.WriteFile(caFile, pair.CertPEM, 0o600))
	return &Kit{CA: ca, CAFile: caFile, Dir: dir, t: t}
}

// Files issues a certificate for role/name valid from now for validity
// (a negative validity issues one that expired that long ago) and returns
// its files.
func (k *Kit) Files(role pki.Role, name string, validity time.Duration) pki.Files {
	k.t.Helper()
	now := time.Now()
	if validity < 0 {
		now = now.Add(2 * validity)
		validity = -validity
	}
	pair, err := k.CA.Issue(pki.Request{Name: name, Role: role, Validity: validity,
		DNSNames: []string{"localhost"}, IPs: loopbackIPs()}, now)
	require.NoError(k.t, err)
	certName, keyName := pki.CertFiles(role, name)
	dir, err := os.MkdirTemp(k.Dir, "id")
	require.NoError(k.t, err)
	cert, key, err := pki.WritePair(dir, certName, keyName, pair)
	require.NoError(k.t, err)
	return pki.Files{CA: k.CAFile, Cert: cert, Key: key}
}

// Source issues role/name for a day and returns a Source serving it.
func (k *Kit) Source(role pki.Role, name string) *pki.Source {
	k.t.Helper()
	src, err := pki.NewSource(k.Files(role, name, 24*time.Hour))
	require.NoError(k.t, err)
	return src
}

// Client returns a client tls.Config for role/name that verifies servers
// against this CA.
func (k *Kit) Client(role pki.Role, name string) *tls.Config {
	k.t.Helper()
	return k.Source(role, name).ClientConfig("")
}

func loopbackIPs() []net.IP {
	return []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
}

// SidecarFiles issues a sidecar certificate for name that may also open
// sessions under the extra worker ids.
func (k *Kit) SidecarFiles(name string, workers ...string) pki.Files {
	k.t.Helper()
	pair, err := k.CA.Issue(pki.Request{Name: name, Role: pki.RoleSidecar, Validity: 24 * time.Hour,
		WorkerIDs: workers}, time.Now())
	require.NoError(k.t, err)
	certName, keyName := pki.CertFiles(pki.RoleSidecar, name)
	dir, err := os.MkdirTemp(k.Dir, "id")
	require.NoError(k.t, err)
	cert, key, err := pki.WritePair(dir, certName, keyName, pair)
	require.NoError(k.t, err)
	return pki.Files{CA: k.CAFile, Cert: cert, Key: key}
}

// Revoke writes (replacing) the kit's revocation list, revoking the
// certificates of files, and returns its path for Files.CRL.
func (k *Kit) Revoke(files ...pki.Files) string {
	k.t.Helper()
	var serials []*big.Int
	for _, f := range files {
		n, err := pki.CertSerial(f.Cert)
		require.NoError(k.t, err)
		serials = append(serials, n)
	}
	b, err := k.CA.IssueCRL(serials, big.NewInt(time.Now().UnixNano()), time.Now(), time.Hour)
	require.NoError(k.t, err)
	path := filepath.Join(k.Dir, pki.CRLFile)
	tmp := path + ".tmp"
	require.NoError(k.t, os.WriteFile(tmp, b, 0o644))
	require.NoError(k.t, os.Rename(tmp, path))
	return path
}
