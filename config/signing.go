package config

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
)

// LoadKey reads signing.key_file: a PEM "PRIVATE KEY" (PKCS #8, as
// `openssl genpkey -algorithm ed25519` writes), or the raw 32-byte seed or
// 64-byte private key. An empty key_file returns nil: the cluster then
// signs nothing.
func (s Signing) LoadKey() (ed25519.PrivateKey, error) {
	if s.KeyFile == "" {
		return nil, nil
	}
	b, err := os.ReadFile(s.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: signing.key_file: %v", ErrRuntime, err)
	}
	if blk, _ := pem.Decode(b); blk != nil {
		k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: signing.key_file: %v", ErrInvalid, err)
		}
		ek, ok := k.(ed25519.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("%w: signing.key_file: must be an Ed25519 key, got %T", ErrInvalid, k)
		}
		return ek, nil
	}
	switch len(b) {
	case ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(b), nil
	case ed25519.PrivateKeySize:
		return ed25519.PrivateKey(b), nil
	}
	return nil, fmt.Errorf("%w: signing.key_file: must be PEM PKCS #8, a 32-byte seed or a 64-byte key (got %d bytes)", ErrInvalid, len(b))
}
