package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/pki"
)

// TestTLSCRLCreateRevokesAndKeepsEarlierSerials: the list a member loads
// refuses the revoked certificate, and a second list keeps the first's.
func TestTLSCRLCreateRevokesAndKeepsEarlierSerials(t *testing.T) {
	dir := t.TempDir()
	code, _, stderr := runCLI(t, "tls", "ca", "create", "--dir", dir)
	require.Equal(t, exitOK, code, stderr)
	for _, n := range []string{"n1", "n3"} {
		code, _, stderr = runCLI(t, "tls", "cert", "create", "--member", "--name", n, "--dir", dir)
		require.Equal(t, exitOK, code, stderr)
	}
	n3, _ := pki.CertFiles(pki.RoleMember, "n3")
	code, out, stderr := runCLI(t, "tls", "crl", "create", "--revoke", filepath.Join(dir, n3), "--dir", dir)
	require.Equal(t, exitOK, code, stderr)
	require.Contains(t, out, "list 1")
	code, out, stderr = runCLI(t, "tls", "crl", "create", "--revoke", "0x1f", "--dir", dir)
	require.Equal(t, exitOK, code, stderr)
	require.Contains(t, out, "list 2")

	cert, key := pki.CertFiles(pki.RoleMember, "n1")
	src, err := pki.NewSource(pki.Files{CA: filepath.Join(dir, pki.CAFile), Cert: filepath.Join(dir, cert),
		Key: filepath.Join(dir, key), CRL: filepath.Join(dir, pki.CRLFile)})
	require.NoError(t, err)
	serial, err := pki.CertSerial(filepath.Join(dir, n3))
	require.NoError(t, err)
	require.Contains(t, out, serial.Text(16), "the second list kept the first's serial")
	require.False(t, src.Current().Revoked(src.Current().Leaf))

	code, _, stderr = runCLI(t, "tls", "crl", "create", "--dir", dir)
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "--revoke")
	code, _, stderr = runCLI(t, "tls", "crl", "create", "--revoke", "not-a-serial", "--dir", dir)
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "--revoke")
}

func TestTLSCertCreateSidecarWorkerIDs(t *testing.T) {
	dir := t.TempDir()
	code, _, stderr := runCLI(t, "tls", "ca", "create", "--dir", dir)
	require.Equal(t, exitOK, code, stderr)
	code, _, stderr = runCLI(t, "tls", "cert", "create", "--sidecar", "--name", "w1", "--worker-ids", "w1-a,w1-b", "--dir", dir)
	require.Equal(t, exitOK, code, stderr)
	cert, key := pki.CertFiles(pki.RoleSidecar, "w1")
	src, err := pki.NewSource(pki.Files{CA: filepath.Join(dir, pki.CAFile), Cert: filepath.Join(dir, cert), Key: filepath.Join(dir, key)})
	require.NoError(t, err)
	require.Equal(t, []string{"w1", "w1-a", "w1-b"}, pki.WorkerIDs(src.Current().Leaf))
	code, _, stderr = runCLI(t, "tls", "cert", "create", "--operator", "--name", "op", "--worker-ids", "x", "--dir", dir)
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "--worker-ids")
}
