package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The file a new user wrote (issue 16, item 5): a type error, an unknown key
// and broken rules must all be reported in one pass, each once.
func TestEveryProblemInOnePass(t *testing.T) {
	stubHost(t, "n1")
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("hello\n"), 0o600))
	body := `cluster: [127.0.0.1:7400]
proxy_addr: 0.0.0.0:7480
heartbeat: {drift: 0.5}
writes:
  rules:
    - {host: a.example, write: maybe}
    - {host: b.example}
  journall: []
tls:
  originate:
    - {host: a.example, ca_file: ` + filepath.Join(dir, "a.pem") + `}
    - {host: b.example, ca_file: ` + filepath.Join(dir, "b.pem") + `}
    - {host: c.example, ca_file: ` + notPEM + `}
timeouts: {dial: soon}
`
	_, err := Parse(RoleSidecar, []byte(body), "sc.yaml")
	require.ErrorIs(t, err, ErrSyntax)
	require.ErrorIs(t, err, ErrUnknownKey)
	require.ErrorIs(t, err, ErrInvalid)
	require.Equal(t, []string{
		`config: sc.yaml:6: writes.rules[0].write: must be true or false (got "maybe")`,
		`config: sc.yaml:8: writes.journall: unknown key (did you mean "journal"?)`,
		`config: sc.yaml:14: timeouts.dial: must be a duration such as "20s" or "500ms" (got "soon")`,
		`config: proxy_addr: must listen on loopback (127.0.0.1, ::1 or localhost) so only the local worker can use it (got "0.0.0.0:7480")`,
		`config: heartbeat.drift: must be between 0 and 0.1 (got 0.5)`,
		`config: writes.rules[1].write: must be set to true or false`,
		`config: tls.originate[0].ca_file: no such file: ` + filepath.Join(dir, "a.pem"),
		`config: tls.originate[1].ca_file: no such file: ` + filepath.Join(dir, "b.pem"),
		`config: tls.originate[2].ca_file: ` + notPEM + ` holds no PEM certificate`,
	}, lines(err), "rules[0].write failed to decode, so its rule is not reported a second time")
}

// The same one pass holds across layers: a mistyped variable does not hide a
// rule broken in the file.
func TestOnePassAcrossLayers(t *testing.T) {
	stubHost(t, "n1")
	path := writeFile(t, "f.yaml", "addr: 127.0.0.1:7490\nrequire_signature: true\n")
	_, err := Load(RoleFenced, Source{Path: path, Env: []string{"FENCEPOST_LOG_LEVEL=", "FENCEPOST_REQUIRE_SIGNATURE=maybe", "FENCEPOST_ADRR=x"}})
	require.Equal(t, []string{
		`config: env FENCEPOST_ADRR: unknown variable: no fenced key maps to it (did you mean "FENCEPOST_ADDR"?)`,
		`config: env FENCEPOST_REQUIRE_SIGNATURE: require_signature: must be true or false (got "maybe")`,
	}, lines(err), "require_signature's own rule is not judged on a value that failed to parse")

	path = writeFile(t, "g.yaml", "addr: 127.0.0.1:7490\nrequire_signature: true\n")
	_, err = Load(RoleFenced, Source{Path: path, Env: []string{"FENCEPOST_LOG_FORMAT=xml", "FENCEPOST_ADRR=x"}})
	require.Equal(t, []string{
		`config: env FENCEPOST_ADRR: unknown variable: no fenced key maps to it (did you mean "FENCEPOST_ADDR"?)`,
		`config: require_signature: needs keys_from: signatures are checked against the cluster's public keys`,
		`config: log.format: must be json or console (got "xml")`,
	}, lines(err))
}

// A file that is not YAML at all is not validated: its keys are unknown, so
// rule errors about them would be noise.
func TestUnparsableFileIsNotValidated(t *testing.T) {
	_, err := Parse(RoleSidecar, []byte("cluster: [\n"), "sc.yaml")
	require.ErrorIs(t, err, ErrSyntax)
	require.Len(t, lines(err), 1)
	require.NotContains(t, err.Error(), "must list at least one")
}

// A CA file that exists and holds a certificate passes plain validation.
func TestCAFileWithCertificateIsValid(t *testing.T) {
	stubHost(t, "n1")
	ca := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(ca, selfSignedPEM(t), 0o600))
	_, err := Parse(RoleSidecar, []byte("cluster: [127.0.0.1:7400]\ntls:\n  originate:\n    - {host: a.example, ca_file: "+ca+"}\n"), "sc.yaml")
	require.NoError(t, err)
}

// selfSignedPEM returns a fresh self-signed CA certificate in PEM.
func selfSignedPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
