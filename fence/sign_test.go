package fence

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func testKey(t testing.TB, seedByte byte) ed25519.PrivateKey {
	t.Helper()
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = seedByte + byte(i)
	}
	return ed25519.NewKeyFromSeed(seed)
}

func pubOf(priv ed25519.PrivateKey) ed25519.PublicKey {
	return priv.Public().(ed25519.PublicKey)
}

func TestSigningMessage(t *testing.T) {
	require.Equal(t, "fencepost-token-v1\ntask-42\n7\nworker-a", string(SigningMessage("task-42", 7, "worker-a")))
	require.Equal(t, "fencepost-token-v1\nt\n18446744073709551615\n", string(SigningMessage("t", 1<<64-1, "")))
}

func TestKeyID(t *testing.T) {
	pub := pubOf(testKey(t, 0))
	id := KeyID(pub)
	require.Len(t, id, 16)
	require.Equal(t, strings.ToLower(id), id)
	require.NotEqual(t, id, KeyID(pubOf(testKey(t, 1))))
}

func TestSignVerify(t *testing.T) {
	priv := testKey(t, 0)
	other := testKey(t, 100)
	keys := NewStaticKeys(pubOf(priv))
	h := Sign(priv, "task-42", 7, "worker-a")
	require.NoError(t, VerifySignature(keys, h, "task-42", 7, "worker-a"))

	// Any change to what is signed breaks the signature: a forged higher
	// token, another task, another holder.
	require.ErrorIs(t, VerifySignature(keys, h, "task-42", 8, "worker-a"), ErrBadSignature)
	require.ErrorIs(t, VerifySignature(keys, h, "task-43", 7, "worker-a"), ErrBadSignature)
	require.ErrorIs(t, VerifySignature(keys, h, "task-42", 7, "worker-b"), ErrBadSignature)

	// A key the verifier does not know.
	require.ErrorIs(t, VerifySignature(keys, Sign(other, "task-42", 7, "worker-a"), "task-42", 7, "worker-a"), ErrUnknownKey)
	require.ErrorIs(t, VerifySignature(nil, h, "task-42", 7, "worker-a"), ErrUnknownKey)

	// A signature by another key presented under the trusted key's id.
	forged := "ed25519=" + KeyID(pubOf(priv)) + ":" + strings.SplitN(Sign(other, "task-42", 7, "worker-a"), ":", 2)[1]
	require.ErrorIs(t, VerifySignature(keys, forged, "task-42", 7, "worker-a"), ErrBadSignature)

	id := KeyID(pubOf(priv))
	sig := strings.SplitN(h, ":", 2)[1]
	malformed := []string{
		"",
		"ed25519",
		"ed25519=",
		"rsa=" + id + ":" + sig,
		"ED25519=" + id + ":" + sig,
		"ed25519=" + id + sig,
		"ed25519=" + strings.ToUpper(id) + ":" + sig,
		"ed25519=" + id[:15] + ":" + sig,
		"ed25519=" + id + ":" + sig + "==",
		"ed25519=" + id + ":" + sig[:85],
		"ed25519=" + id + ":" + strings.ReplaceAll(strings.ReplaceAll(sig, "-", "+"), "_", "/") + "+/",
		"ed25519=" + id + ":" + base64.StdEncoding.EncodeToString(make([]byte, 64)),
		" ed25519=" + id + ":" + sig,
	}
	for _, m := range malformed {
		require.ErrorIs(t, VerifySignature(keys, m, "task-42", 7, "worker-a"), ErrBadSignature, "%q", m)
	}
}

func TestParseKeys(t *testing.T) {
	a, b := pubOf(testKey(t, 0)), pubOf(testKey(t, 50))
	doc := NewKeysDocument(a, b)
	data := mustJSON(t, doc)
	keys, err := ParseKeys(data)
	require.NoError(t, err)
	require.Len(t, keys, 2)
	got, ok := keys.PublicKey(KeyID(b))
	require.True(t, ok)
	require.Equal(t, b, got)

	bad := []string{
		`{`,
		`{"keys":[{"id":"` + KeyID(a) + `","alg":"RSA","public_key":"` + base64.StdEncoding.EncodeToString(a) + `"}]}`,
		`{"keys":[{"id":"` + KeyID(b) + `","alg":"Ed25519","public_key":"` + base64.StdEncoding.EncodeToString(a) + `"}]}`,
		`{"keys":[{"id":"` + KeyID(a) + `","alg":"Ed25519","public_key":"` + base64.RawURLEncoding.EncodeToString(a) + `"}]}`,
		`{"keys":[{"id":"x","alg":"Ed25519","public_key":"AAAA"}]}`,
	}
	for _, s := range bad {
		_, err := ParseKeys([]byte(s))
		require.ErrorIs(t, err, ErrInvalidConfig, s)
	}
}

func TestFetchKeys(t *testing.T) {
	pub := pubOf(testKey(t, 0))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != KeysPath {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(mustJSON(t, NewKeysDocument(pub)))
	}))
	defer srv.Close()
	keys, err := FetchKeys(context.Background(), srv.Client(), srv.URL+KeysPath)
	require.NoError(t, err)
	require.Equal(t, NewStaticKeys(pub), keys)
	_, err = FetchKeys(context.Background(), srv.Client(), srv.URL+"/nope")
	require.Error(t, err)
}

// specExample is the worked example of SPEC.md section 3.1; the key is
// derived from the fixed seed 0x00..0x1f.
type specExample struct {
	seedHex, pubB64, keyID, message, header, keysJSON string
}

func computeSpecExample(t testing.TB) specExample {
	priv := testKey(t, 0)
	pub := pubOf(priv)
	return specExample{
		seedHex:  hex.EncodeToString(priv.Seed()),
		pubB64:   base64.StdEncoding.EncodeToString(pub),
		keyID:    KeyID(pub),
		message:  fmt.Sprintf("%q", SigningMessage("task-42", 7, "worker-a")),
		header:   Sign(priv, "task-42", 7, "worker-a"),
		keysJSON: string(mustJSON(t, NewKeysDocument(pub))),
	}
}

// TestSpecExample keeps the worked example in SPEC.md true: every value
// printed there must be what this code computes.
func TestSpecExample(t *testing.T) {
	ex := computeSpecExample(t)
	t.Logf("seed %s\npublic key %s\nkey id %s\nmessage %s\nheader %s\nkeys %s", ex.seedHex, ex.pubB64, ex.keyID, ex.message, ex.header, ex.keysJSON)
	spec, err := os.ReadFile("SPEC.md")
	require.NoError(t, err)
	for name, v := range map[string]string{
		"seed": ex.seedHex, "public key": ex.pubB64, "key id": ex.keyID,
		"message": ex.message, "signature header": ex.header, "keys document": ex.keysJSON,
	} {
		require.Contains(t, string(spec), v, "SPEC.md lost the example's %s", name)
	}
	keys, err := ParseKeys([]byte(ex.keysJSON))
	require.NoError(t, err)
	require.NoError(t, VerifySignature(keys, ex.header, "task-42", 7, "worker-a"))
}
