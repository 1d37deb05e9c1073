package fence

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// KeysPath is where the lease cluster serves its public keys.
const KeysPath = "/v1/keys"

// AlgEd25519 is the only value of KeyEntry.Alg in format v1.
const AlgEd25519 = "Ed25519"

// maxKeysDocument bounds how much of a key document FetchKeys reads.
const maxKeysDocument = 1 << 20

// KeysDocument is the JSON the cluster serves at GET /v1/keys:
// {"keys":[{"id":"<KeyID>","alg":"Ed25519","public_key":"<std base64>"}]}.
type KeysDocument struct {
	// Keys lists every key a verifier should accept, newest first by
	// convention (order carries no meaning for verification).
	Keys []KeyEntry `json:"keys"`
}

// KeyEntry is one public key of a KeysDocument.
type KeyEntry struct {
	// ID is KeyID(public key).
	ID string `json:"id"`
	// Alg is always "Ed25519".
	Alg string `json:"alg"`
	// PublicKey is the 32-byte key in standard, padded base64.
	PublicKey string `json:"public_key"`
}

// NewKeysDocument builds the document for the given public keys.
func NewKeysDocument(pubs ...ed25519.PublicKey) KeysDocument {
	d := KeysDocument{Keys: make([]KeyEntry, 0, len(pubs))}
	for _, p := range pubs {
		d.Keys = append(d.Keys, KeyEntry{
			ID:        KeyID(p),
			Alg:       AlgEd25519,
			PublicKey: base64.StdEncoding.EncodeToString(p),
		})
	}
	return d
}

// ParseKeys decodes a key document into a StaticKeys. Every entry must be
// an Ed25519 key of 32 bytes whose id equals KeyID of the key; an entry
// that is inconsistent fails the whole document rather than being
// skipped, because a silently dropped key shows up later as rejected
// writes that are hard to explain.
func ParseKeys(data []byte) (StaticKeys, error) {
	var doc KeysDocument
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%w: key document: %v", ErrInvalidConfig, err)
	}
	keys := make(StaticKeys, len(doc.Keys))
	for i, e := range doc.Keys {
		if e.Alg != AlgEd25519 {
			return nil, fmt.Errorf("%w: key %d: alg %q, want %q", ErrInvalidConfig, i, e.Alg, AlgEd25519)
		}
		raw, err := base64.StdEncoding.DecodeString(e.PublicKey)
		if err != nil || len(raw) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("%w: key %d: public_key is not %d bytes of standard base64", ErrInvalidConfig, i, ed25519.PublicKeySize)
		}
		pub := ed25519.PublicKey(raw)
		if KeyID(pub) != e.ID {
			return nil, fmt.Errorf("%w: key %d: id %q does not match the key (want %q)", ErrInvalidConfig, i, e.ID, KeyID(pub))
		}
		keys[e.ID] = pub
	}
	return keys, nil
}

// FetchKeys GETs a key document (usually clusterURL + KeysPath) and parses
// it. A nil client means http.DefaultClient. Services typically call it at
// start and again when they see an unknown key id.
func FetchKeys(ctx context.Context, client *http.Client, url string) (StaticKeys, error) {
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: keys url: %v", ErrInvalidConfig, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fence: fetch keys: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxKeysDocument))
	if err != nil {
		return nil, fmt.Errorf("fence: fetch keys: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fence: fetch keys: %s answered %d", url, resp.StatusCode)
	}
	return ParseKeys(body)
}
