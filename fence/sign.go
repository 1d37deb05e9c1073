package fence

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

// signingContext is the first line of every signed message; it versions
// the format and keeps these signatures from being valid for anything else
// signed with the same key.
const signingContext = "fencepost-token-v1"

// signaturePrefix names the only algorithm the v1 header carries.
const signaturePrefix = "ed25519="

// keyIDLen is the length of a KeyID: 8 bytes in lowercase hex.
const keyIDLen = 16

// sigB64 is the header's signature encoding: base64url without padding,
// strict so each signature has exactly one spelling.
var sigB64 = base64.RawURLEncoding.Strict()

// SigningMessage returns the bytes the cluster signs for a token:
// "fencepost-token-v1\n" + task + "\n" + decimal epoch + "\n" + holder.
// Task and holder must already be valid ids (no control characters), which
// makes the encoding unambiguous.
func SigningMessage(task string, epoch uint64, holder string) []byte {
	e := FormatEpoch(epoch)
	b := make([]byte, 0, len(signingContext)+len(task)+len(e)+len(holder)+3)
	b = append(b, signingContext...)
	b = append(b, '\n')
	b = append(b, task...)
	b = append(b, '\n')
	b = append(b, e...)
	b = append(b, '\n')
	b = append(b, holder...)
	return b
}

// KeyID names a public key: the first 8 bytes of SHA-256(pub) in lowercase
// hex (16 characters). Verifiers look keys up by it, so rotation works by
// publishing the new key before signing with it.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:keyIDLen/2])
}

// Sign returns the full X-Fencing-Signature header value for a token.
func Sign(priv ed25519.PrivateKey, task string, epoch uint64, holder string) string {
	pub, _ := priv.Public().(ed25519.PublicKey)
	sig := ed25519.Sign(priv, SigningMessage(task, epoch, holder))
	return signaturePrefix + KeyID(pub) + ":" + sigB64.EncodeToString(sig)
}

// KeySet resolves a key id (see KeyID) to an Ed25519 public key.
type KeySet interface {
	// PublicKey returns the key named id, or false when it is unknown.
	PublicKey(id string) (ed25519.PublicKey, bool)
}

// StaticKeys is a KeySet backed by a map from KeyID to public key. Build it
// with NewStaticKeys or ParseKeys; it is read-only once built and so safe
// for concurrent use.
type StaticKeys map[string]ed25519.PublicKey

// NewStaticKeys indexes the given public keys by their KeyID.
func NewStaticKeys(pubs ...ed25519.PublicKey) StaticKeys {
	s := make(StaticKeys, len(pubs))
	for _, p := range pubs {
		s[KeyID(p)] = p
	}
	return s
}

// PublicKey implements KeySet.
func (s StaticKeys) PublicKey(id string) (ed25519.PublicKey, bool) {
	k, ok := s[id]
	return k, ok
}

// parseSignatureHeader splits "ed25519=<keyID>:<sig>" strictly.
func parseSignatureHeader(header string) (keyID string, sig []byte, err error) {
	rest, ok := strings.CutPrefix(header, signaturePrefix)
	if !ok {
		return "", nil, fmt.Errorf("%w: want prefix %q", ErrBadSignature, signaturePrefix)
	}
	keyID, enc, ok := strings.Cut(rest, ":")
	if !ok {
		return "", nil, fmt.Errorf("%w: no ':' after the key id", ErrBadSignature)
	}
	if len(keyID) != keyIDLen || strings.Trim(keyID, "0123456789abcdef") != "" {
		return "", nil, fmt.Errorf("%w: key id is not %d lowercase hex digits", ErrBadSignature, keyIDLen)
	}
	sig, err = sigB64.DecodeString(enc)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return "", nil, fmt.Errorf("%w: signature is not %d bytes of unpadded base64url", ErrBadSignature, ed25519.SignatureSize)
	}
	return keyID, sig, nil
}

// VerifySignature checks an X-Fencing-Signature header value against the
// token it claims to sign. It returns nil, or an error wrapping
// ErrBadSignature (malformed header, wrong signature) or ErrUnknownKey.
func VerifySignature(keys KeySet, header, task string, epoch uint64, holder string) error {
	keyID, sig, err := parseSignatureHeader(header)
	if err != nil {
		return err
	}
	if keys == nil {
		return fmt.Errorf("%w: no key set configured", ErrUnknownKey)
	}
	pub, ok := keys.PublicKey(keyID)
	if !ok || len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("%w: key id %s", ErrUnknownKey, keyID)
	}
	if !ed25519.Verify(pub, SigningMessage(task, epoch, holder), sig) {
		return fmt.Errorf("%w: does not verify with key %s", ErrBadSignature, keyID)
	}
	return nil
}
