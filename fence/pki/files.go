package pki

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// File names `fencepost tls` writes in its output directory.
const (
	CAFile    = "ca.pem"
	CAKeyFile = "ca-key.pem"
)

// ErrExists: an output file is already there; issuing never overwrites a
// key, so a second run cannot silently replace a working one.
var ErrExists = errors.New("pki: file exists")

// CertFiles returns the certificate and key file names of an identity:
// "<role>-<name>.pem" and "<role>-<name>-key.pem".
func CertFiles(role Role, name string) (cert, key string) {
	base := string(role) + "-" + name
	return base + ".pem", base + "-key.pem"
}

// WritePair writes p into dir as certName (0644) and keyName (0600). It
// refuses to replace either file and, on failure, leaves neither behind.
func WritePair(dir, certName, keyName string, p Pair) (certPath, keyPath string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("pki: create %s: %w", dir, err)
	}
	certPath, keyPath = filepath.Join(dir, certName), filepath.Join(dir, keyName)
	for _, p := range []string{certPath, keyPath} {
		if _, err := os.Lstat(p); err == nil {
			return "", "", fmt.Errorf("%w: %s (remove it first to issue a new one)", ErrExists, p)
		}
	}
	if err := writeNew(keyPath, p.KeyPEM, 0o600); err != nil {
		return "", "", err
	}
	if err := writeNew(certPath, p.CertPEM, 0o644); err != nil {
		_ = os.Remove(keyPath)
		return "", "", err
	}
	return certPath, keyPath, nil
}

// WriteNew creates path with mode (O_EXCL: never follows or replaces an
// existing file) and writes b; a key is written with 0600.
func WriteNew(path string, b []byte, mode os.FileMode) error { return writeNew(path, b, mode) }

func writeNew(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%w: %s", ErrExists, path)
		}
		return fmt.Errorf("pki: write %s: %w", path, err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("pki: write %s: %w", path, err)
	}
	return nil
}

// LoadCA reads the CA written by `fencepost tls ca create`.
func LoadCA(certPath, keyPath string) (*CA, error) {
	c, err := os.ReadFile(certPath)
	if err != nil {
		return nil, fmt.Errorf("pki: read CA certificate: %w", err)
	}
	k, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("pki: read CA key: %w", err)
	}
	return ParseCA(c, k)
}

// EnsureLocal makes dir hold a CA and, for every request, a certificate
// issued by it, creating only what is missing (a second start reuses the
// first one's files). It is how `fencepost dev` gets its certificates
// without a set-up step; a real cluster uses `fencepost tls`.
func EnsureLocal(dir string, reqs []Request, now time.Time) (map[Identity]Files, error) {
	caCert, caKey := filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile)
	if _, err := os.Stat(caCert); errors.Is(err, os.ErrNotExist) {
		_, pair, err := NewCA("fencepost-dev-ca", now, DefaultCAValidity)
		if err != nil {
			return nil, err
		}
		if _, _, err := WritePair(dir, CAFile, CAKeyFile, pair); err != nil {
			return nil, err
		}
	}
	ca, err := LoadCA(caCert, caKey)
	if err != nil {
		return nil, err
	}
	out := make(map[Identity]Files, len(reqs))
	for _, r := range reqs {
		certName, keyName := CertFiles(r.Role, r.Name)
		f := Files{CA: caCert, Cert: filepath.Join(dir, certName), Key: filepath.Join(dir, keyName)}
		if _, err := os.Stat(f.Cert); errors.Is(err, os.ErrNotExist) {
			pair, err := ca.Issue(r, now)
			if err != nil {
				return nil, err
			}
			if _, _, err := WritePair(dir, certName, keyName, pair); err != nil {
				return nil, err
			}
		}
		out[Identity{Name: r.Name, Role: r.Role}] = f
	}
	return out, nil
}
