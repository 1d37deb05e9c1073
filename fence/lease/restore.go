package lease

import (
	"sort"
	"time"
)

// RestoreSummary counts what PrepareRestore ended.
type RestoreSummary struct {
	// Expired counts the live leases expired (their holders are gone).
	Expired int `json:"expired"`
	// Sessions counts the sessions closed.
	Sessions int `json:"sessions"`
}

// PrepareRestore turns a model read from a backup into the first state of
// a new cluster (raftstore's restore). Nothing of the old cluster's
// liveness survives: every active or suspect lease is expired, so the new
// leader's resume guard reclaims it as it would a dead holder's (in-flight
// journal intents become in doubt, nothing is handed over silently), and
// every session is closed, so no sidecar of the old cluster can heartbeat
// or act through one again. The de-duplication table is dropped (a retry
// from before the restore must not be answered with the old cluster's
// result). lastIndex becomes floor: the caller starts the new log above
// it, so every epoch granted from now on exceeds it.
func (m *Model) PrepareRestore(floor uint64, now time.Time) RestoreSummary {
	var sum RestoreSummary
	ids := make([]string, 0, len(m.tasks))
	for id := range m.tasks {
		ids = append(ids, id)
	}
	sort.Strings(ids) // the same backup restores to the same bytes
	c := &Command{Op: OpExpire, Time: now}
	at := StampOf(now)
	for _, id := range ids {
		t := m.writable(m.tasks[id])
		l := t.Lease
		if l == nil || (l.Status != StatusActive && l.Status != StatusSuspectDead) {
			continue
		}
		l.Status, l.StatusAt, l.Reason = StatusExpired, at, reasonRestored
		t.UpdatedAt = at
		sum.Expired++
	}
	sids := make([]string, 0, len(m.sessions))
	for id := range m.sessions {
		sids = append(sids, id)
	}
	sort.Strings(sids)
	for _, id := range sids {
		c.Op, c.SessionID = OpCloseSession, id
		m.closeSession(c)
		sum.Sessions++
	}
	m.dedup = newDedupLog()
	if floor > m.lastIndex {
		m.lastIndex = floor
	}
	return sum
}

// reasonRestored is the status reason of a lease PrepareRestore expired.
const reasonRestored = "cluster restored from a backup"
