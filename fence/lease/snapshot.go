package lease

import (
	"crypto/sha256"
	"fmt"
	"io"
)

// snapshotVersion is bumped when the snapshot layout changes incompatibly.
const snapshotVersion = 1

// snapshot is the layout of a model snapshot: one JSON object with these
// keys, in this order, then a newline. View.WriteTo streams it and
// ReadSnapshot reads it element by element, so neither holds the whole
// encoding in memory; the type itself documents the layout (and tests
// decode into it).
type snapshot struct {
	Version    int                   `json:"version"`
	LastIndex  uint64                `json:"lastIndex"`
	Tasks      []*Task               `json:"tasks"`
	Sessions   []*Session            `json:"sessions"`
	Dedup      map[string]dedupEntry `json:"dedup"`
	DedupOrder []dedupRef            `json:"dedupOrder"`
}

// WriteSnapshot writes the whole model to w. Tasks and sessions are written
// in id order so equal models produce equal bytes (Hash relies on it).
func (m *Model) WriteSnapshot(w io.Writer) error {
	v := m.View()
	defer v.Release()
	_, err := v.WriteTo(w)
	return err
}

// Hash returns a digest of the whole state. Replicas that applied the same
// log must return the same hash; tests compare them across a cluster.
func (m *Model) Hash() [32]byte {
	h := sha256.New()
	if err := m.WriteSnapshot(h); err != nil {
		// Encoding plain structs into a hash cannot fail; if it does the
		// state is corrupt and replicas must not continue.
		panic(fmt.Sprintf("lease: hash: %v", err))
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}
