// Package pkitest gives tests a throwaway cluster CA and identities
// issued by it, written to a test's temporary directory, so every package
// that speaks TLS tests against the same certificates production uses.
package pkitest

import (
	"crypto/tls"
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
