package lease

import (
	"iter"
	"time"
)

// The scans below hand out the model's own leases rather than copies: the
// leader's expiry loop looks at every live lease every tick and a heartbeat
// at every lease of its session, and copying (and sorting) 100k leases a
// tick was the largest cost of an idle leader. The caller must hold the
// model for reading while it iterates, must not modify a yielded lease and
// must not keep the pointer after the iteration.

// LiveScan yields every lease that still blocks a new grant (active,
// suspect_dead, expired), in no particular order.
func (m *Model) LiveScan() iter.Seq[*Lease] {
	return func(yield func(*Lease) bool) {
		for _, set := range m.held {
			for _, t := range set {
				if !yield(t.Lease) {
					return
				}
			}
		}
	}
}

// SessionScan yields the live leases held through session id, in no
// particular order.
func (m *Model) SessionScan(id string) iter.Seq[*Lease] {
	return func(yield func(*Lease) bool) {
		for _, t := range m.held[id] {
			if !yield(t.Lease) {
				return
			}
		}
	}
}

// SessionIDs yields the id of every open session, in no particular order.
func (m *Model) SessionIDs() iter.Seq[string] {
	return func(yield func(string) bool) {
		for id := range m.sessions {
			if !yield(id) {
				return
			}
		}
	}
}

// HasSession reports whether session id is open.
func (m *Model) HasSession(id string) bool {
	_, ok := m.sessions[id]
	return ok
}

// IsLive reports whether (task, epoch) is the task's current lease and
// still blocks a new grant.
func (m *Model) IsLive(task string, epoch uint64) bool {
	t, ok := m.tasks[task]
	return ok && t.Lease != nil && t.Lease.Epoch == epoch && t.Lease.Status.Live()
}

// IntentsUntil returns the latest deadline of the journaled intents of
// task recorded under epoch that have no outcome yet, and whether any
// exists: the resume guard cannot pass before it.
func (m *Model) IntentsUntil(task string, epoch uint64) (until time.Time, ok bool) {
	t, found := m.tasks[task]
	if !found {
		return until, false
	}
	var latest Stamp
	for _, e := range t.Journal() {
		if e.State == EffectIntent && e.Epoch == epoch && (!ok || e.Deadline.After(latest)) {
			latest, ok = e.Deadline, true
		}
	}
	if ok {
		until = latest.Time()
	}
	return until, ok
}

// SessionOwner returns the identity that opened session id, if it is open.
func (m *Model) SessionOwner(id string) (string, bool) {
	s, ok := m.sessions[id]
	if !ok {
		return "", false
	}
	return s.Owner, true
}

// TaskProfile returns the profile name of task id, if it exists: the
// leader looks up a lease's progress timeout by it once per lease.
func (m *Model) TaskProfile(id string) (string, bool) {
	t, ok := m.tasks[id]
	if !ok {
		return "", false
	}
	return t.Profile, true
}
