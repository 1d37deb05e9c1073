package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/config"
	"github.com/fencepost/fencepost/fence/pki"
)

func TestTLSCommandsWriteACAAndRoleCertificates(t *testing.T) {
	dir := t.TempDir()
	code, _, stderr := runCLI(t, "tls", "ca", "create", "--dir", dir)
	require.Equal(t, exitOK, code, stderr)
	code, _, stderr = runCLI(t, "tls", "cert", "create", "--server", "--name", "n1", "--dns", "n1.example", "--dir", dir)
	require.Equal(t, exitOK, code, stderr)
	code, _, stderr = runCLI(t, "tls", "cert", "create", "--sidecar", "--name", "w1", "--dir", dir)
	require.Equal(t, exitOK, code, stderr)

	cert, key := pki.CertFiles(pki.RoleMember, "n1")
	src, err := pki.NewSource(pki.Files{CA: filepath.Join(dir, pki.CAFile), Cert: filepath.Join(dir, cert), Key: filepath.Join(dir, key)})
	require.NoError(t, err)
	require.Equal(t, pki.Identity{Name: "n1", Role: pki.RoleMember}, src.Current().Identity, "--server issues a member certificate")
	require.ElementsMatch(t, []string{"n1", "n1.example"}, src.Current().Leaf.DNSNames)
	for _, k := range []string{pki.CAKeyFile, key} {
		fi, err := os.Stat(filepath.Join(dir, k))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), k)
	}

	code, _, stderr = runCLI(t, "tls", "cert", "create", "--sidecar", "--name", "w1", "--dir", dir)
	require.Equal(t, exitRuntime, code)
	require.Contains(t, stderr, "file exists", "a second run never replaces a key")
	code, _, stderr = runCLI(t, "tls", "cert", "create", "--sidecar", "--operator", "--name", "x", "--dir", dir)
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "exactly one")
	code, _, stderr = runCLI(t, "tls", "cert", "create", "--reader", "--name", "r", "--dir", t.TempDir())
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "--ca/--ca-key")
}

func TestTLSSigningKeyIsWhatTheServerLoads(t *testing.T) {
	dir := t.TempDir()
	code, _, stderr := runCLI(t, "tls", "signing-key", "create", "--dir", dir)
	require.Equal(t, exitOK, code, stderr)
	path := filepath.Join(dir, signingKeyFile)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	key, err := config.Signing{KeyFile: path}.LoadKey()
	require.NoError(t, err)
	require.NotNil(t, key)
}

// TestTLSInitRefusesABadName: init names certificates as cert create
// does, so a name that would be a path is one usage line and exit 2,
// before anything is written.
func TestTLSInitRefusesABadName(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	code, _, stderr := runCLI(t, "tls", "init", "--dir", dir, "--member", "n1,a/b")
	require.Equal(t, exitUsage, code, stderr)
	require.Equal(t, 1, strings.Count(stderr, "\n"), stderr)
	require.Contains(t, stderr, `--member "a/b"`)
	_, err := os.Stat(dir)
	require.True(t, os.IsNotExist(err), "nothing is written")
}
