package raftstore

import (
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
	// Removed is the deny list of removed members (peerset.go); absent in
	// snapshots of versions before it.
	Removed []string `json:"removed,omitempty"`
}

// fsmSnapshot is the state at one index: the model's View plus copies of
// the small cluster metadata. Snapshot only takes the view (a pointer per
// task, under the lock); Persist streams the JSON to the sink while Apply
// goes on, the model copying a task before it changes one the view holds.
// Encoding the whole state into a buffer under the lock, as before, made
// every snapshot of 100k leases a ~100 MB allocation (twice: the encoder's
// buffer, then the copy) that stayed in RSS, and stalled Apply meanwhile.
type fsmSnapshot struct {
	header snapshotHeader
	view   *lease.View
}

// Snapshot implements raft.FSM.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	if e := f.halt.halted(); e != nil {
		// raft would label the snapshot with the index of the last entry
		// it handed over, past the entries this fsm skipped.
		return nil, e
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return &fsmSnapshot{header: f.header(true), view: f.model.View()}, nil
}

// header returns the snapshot header of the current state, with copies of
// the metadata (Apply replaces them later). withApplied adds the applied
// index, which snapshots need but the state hash leaves out (an ignored
// entry advances it without changing anything). The caller holds f.mu.
func (f *fsm) header(withApplied bool) snapshotHeader {
	h := snapshotHeader{Format: snapshotFormat, Keys: append([]signingKey(nil), f.keys...)}
	if withApplied {
		h.Applied = f.applied.get()
	}
	for _, n := range f.nodes {
		h.Nodes = append(h.Nodes, n)
	}
	sort.Slice(h.Nodes, func(i, j int) bool { return h.Nodes[i].ID < h.Nodes[j].ID })
	if len(f.removed) > 0 {
		h.Removed = f.removedList()
	}
	return h
}

// writeTo encodes the snapshot: the header line, then the model's view.
func (s *fsmSnapshot) writeTo(w io.Writer) error {
	if err := json.NewEncoder(w).Encode(&s.header); err != nil {
		return fmt.Errorf("raftstore: encode snapshot header: %w", err)
	}
	if _, err := s.view.WriteTo(w); err != nil {
		return fmt.Errorf("raftstore: encode model snapshot: %w", err)
	}
	return nil
}

// Persist implements raft.FSMSnapshot.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.writeTo(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("raftstore: write snapshot: %w", err)
	}
	return sink.Close()
}

// Release implements raft.FSMSnapshot: the model stops copying for it.
func (s *fsmSnapshot) Release() { s.view.Release() }

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
	removed := make(map[string]bool, len(h.Removed))
	for _, id := range h.Removed {
		removed[id] = true
	}
	f.mu.Lock()
	for i := range h.Keys {
		h.Keys[i].Priv = nil // see signingKey
	}
	f.model, f.nodes, f.keys, f.removed = m, nodes, h.Keys, removed
	f.mu.Unlock()
	f.applied.set(max(h.Applied, m.LastIndex()))
	return nil
}

// StateHash returns a digest of the replicated state (model, members'
// addresses, signing keys), without the applied index. Replicas that applied the same log return the
// same hash.
func (f *fsm) StateHash() [32]byte {
	h := sha256.New()
	f.mu.Lock()
	snap := &fsmSnapshot{header: f.header(false), view: f.model.View()}
	f.mu.Unlock()
	defer snap.Release()
	if err := snap.writeTo(h); err != nil {
		panic(fmt.Sprintf("raftstore: hash state: %v", err))
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}
