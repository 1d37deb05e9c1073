package lease

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"sort"
)

// snapshotVersion is bumped when the snapshot layout changes incompatibly.
const snapshotVersion = 1

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
	s := snapshot{
		Version: snapshotVersion, LastIndex: m.lastIndex,
		Sessions: m.Sessions(), Dedup: m.dedup, DedupOrder: m.dedupOrder,
	}
	ids := make([]string, 0, len(m.tasks))
	for id := range m.tasks {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	s.Tasks = make([]*Task, len(ids))
	for i, id := range ids {
		s.Tasks[i] = m.tasks[id]
	}
	return json.NewEncoder(w).Encode(&s)
}

// ReadSnapshot replaces the model's state with a snapshot written by
// WriteSnapshot, rebuilding the derived indexes.
func (m *Model) ReadSnapshot(r io.Reader) error {
	var s snapshot
	if err := json.NewDecoder(r).Decode(&s); err != nil {
		return fmt.Errorf("lease: decode snapshot: %w", err)
	}
	if s.Version != snapshotVersion {
		return fmt.Errorf("lease: snapshot version %d, want %d", s.Version, snapshotVersion)
	}
	n := New()
	n.lastIndex = s.LastIndex
	for _, ss := range s.Sessions {
		n.sessions[ss.ID] = ss
	}
	for _, t := range s.Tasks {
		t.qidx = -1
		n.tasks[t.ID] = t
		if t.State == TaskPending {
			n.queue.push(t)
		}
		if l := t.Lease; l != nil && l.Status.Live() {
			if n.held[l.SessionID] == nil {
				n.held[l.SessionID] = map[string]struct{}{}
			}
			n.held[l.SessionID][t.ID] = struct{}{}
		}
	}
	if s.Dedup != nil {
		n.dedup = s.Dedup
	}
	n.dedupOrder = s.DedupOrder
	*m = *n
	return nil
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
