package config

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSigningLoadKey(t *testing.T) {
	dir := t.TempDir()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	require.NoError(t, err)

	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o600))
		return p
	}
	for name, path := range map[string]string{
		"pem":  write("k.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"seed": write("k.seed", priv.Seed()),
		"raw":  write("k.raw", priv),
	} {
		got, err := Signing{KeyFile: path}.LoadKey()
		require.NoError(t, err, name)
		require.True(t, priv.Equal(got), name)
	}

	none, err := Signing{}.LoadKey()
	require.NoError(t, err)
	require.Nil(t, none)

	_, err = Signing{KeyFile: write("bad", []byte("short"))}.LoadKey()
	require.True(t, errors.Is(err, ErrInvalid), "%v", err)
	_, err = Signing{KeyFile: filepath.Join(dir, "missing")}.LoadKey()
	require.True(t, errors.Is(err, ErrRuntime), "%v", err)
}
