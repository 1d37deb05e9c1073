package raftstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"github.com/fencepost/fencepost/fence/lease"
	"github.com/hashicorp/raft"
)

// snapshotFormat versions the snapshot layout: one JSON header line with
// the cluster metadata, then the model's own snapshot.
const snapshotFormat = 1

type snapshotHeader struct {
	Format  int          `json:"format"`
	Applied uint64       `json:"applied"`
	Nodes   []nodeMeta   `json:"nodes"`
	Keys    []signingKey `json:"keys"`
}

// fsmSnapshot is a serialised copy of the state. The model has no
// copy-on-write structure, so Snapshot encodes it under the read lock and
// Persist only writes bytes; Apply waits for the encoding, not for the disk.
type fsmSnapshot struct{ data []byte }

// Snapshot implements raft.FSM.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	var buf bytes.Buffer
	if err := f.writeState(&buf, true); err != nil {
		return nil, err
	}
	return &fsmSnapshot{data: buf.Bytes()}, nil
}

// writeState encodes the state; withApplied adds the applied index, which
// snapshots need but the state hash leaves out (an ignored entry advances
// it without changing anything).
func (f *fsm) writeState(w io.Writer, withApplied bool) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	h := snapshotHeader{Format: snapshotFormat, Keys: f.keys}
	if withApplied {
		h.Applied = f.applied.get()
	}
	for _, n := range f.nodes {
		h.Nodes = append(h.Nodes, n)
	}
	sort.Slice(h.Nodes, func(i, j int) bool { return h.Nodes[i].ID < h.Nodes[j].ID })
	if err := json.NewEncoder(w).Encode(&h); err != nil {
		return fmt.Errorf("raftstore: encode snapshot header: %w", err)
	}
	if err := f.model.WriteSnapshot(w); err != nil {
		return fmt.Errorf("raftstore: encode model snapshot: %w", err)
	}
	return nil
}

// Persist implements raft.FSMSnapshot.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s.data); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("raftstore: write snapshot: %w", err)
	}
	return sink.Close()
}

// Release implements raft.FSMSnapshot.
func (s *fsmSnapshot) Release() {}

// Restore implements raft.FSM: it replaces the whole state with the
// snapshot's, nothing of the previous state survives.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	dec := json.NewDecoder(rc)
	var h snapshotHeader
	if err := dec.Decode(&h); err != nil {
		return fmt.Errorf("raftstore: decode snapshot header: %w", err)
	}
	if h.Format != snapshotFormat {
		return fmt.Errorf("raftstore: snapshot format %d, want %d", h.Format, snapshotFormat)
	}
	m := lease.New()
	if err := m.ReadSnapshot(io.MultiReader(dec.Buffered(), rc)); err != nil {
		return err
	}
	nodes := make(map[string]nodeMeta, len(h.Nodes))
	for _, n := range h.Nodes {
		nodes[n.ID] = n
	}
	f.mu.Lock()
	f.model, f.nodes, f.keys = m, nodes, h.Keys
	f.mu.Unlock()
	f.applied.set(max(h.Applied, m.LastIndex()))
	return nil
}

// StateHash returns a digest of the replicated state (model, members'
// addresses, signing keys), without the applied index. Replicas that applied the same log return the
// same hash.
func (f *fsm) StateHash() [32]byte {
	h := sha256.New()
	if err := f.writeState(h, false); err != nil {
		panic(fmt.Sprintf("raftstore: hash state: %v", err))
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}
