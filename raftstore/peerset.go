package raftstore

import (
	"errors"
	"fmt"
	"sort"

	"github.com/hashicorp/raft"
)

// entryRemoved records that a member was removed: its name is refused on
// the raft port and by Join from then on. Ignorable: a version that does
// not know it skips it and only goes without the deny list, as before.
const entryRemoved = 4 | ignorableFlag

// removedMember is entryRemoved's body.
type removedMember struct {
	ID string `json:"id"`
}

// errNotMember and errRemovedMember are why the raft guard refused a
// member certificate (the RPC is refused with errRefused).
var (
	errNotMember     = errors.New("not in the raft configuration")
	errRemovedMember = errors.New("removed from the cluster; its name is never accepted again")
)

// applyRemoved adds a name to the replicated deny list.
func applyRemoved(f *fsm, _ uint64, body []byte) (any, error) {
	var r removedMember
	if err := decodeBody(body, &r); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.removed == nil {
		f.removed = map[string]bool{}
	}
	f.removed[r.ID] = true
	return nil, nil
}

// isRemoved reports whether id is on the deny list.
func (f *fsm) isRemoved(id string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.removed[id]
}

// removedList is the deny list, sorted, for snapshots and the state hash.
// The caller holds f.mu.
func (f *fsm) removedList() []string {
	out := make([]string, 0, len(f.removed))
	for id := range f.removed {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// peerAllowed is the raft guard's membership rule for a peer whose member
// certificate names name (the guard already checked that every RPC claims
// that name): it must be a server of the latest raft configuration (the
// one raft itself acts on, which includes a server being added), and not
// on the replicated deny list of removed members. A node whose
// configuration is still empty is one waiting for its join: it accepts any
// member not denied, as it has nothing to protect yet and learns its
// configuration from the leader's first entries.
//
// Raft's latest configuration is read from an atomic (GetConfiguration
// does not enter raft's loop), so the check costs a copy of a few servers
// per RPC.
func (s *Store) peerAllowed(name string) (reason string, err error) {
	if s.fsm.isRemoved(name) {
		return refusedRemoved, errRemovedMember
	}
	r := s.raftRef.Load()
	if r == nil {
		return refusedNotMember, fmt.Errorf("%w (raft is not started yet)", errNotMember)
	}
	servers := r.GetConfiguration().Configuration().Servers
	if len(servers) == 0 {
		return "", nil
	}
	for _, srv := range servers {
		if srv.ID == raft.ServerID(name) {
			return "", nil
		}
	}
	return refusedNotMember, errNotMember
}
