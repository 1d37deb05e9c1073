package lease

import "fmt"

// Quota bounds what one identity may hold in the model. The leader stamps
// it into the commands that open sessions and create tasks (like a
// profile's TTL), so every replica decides alike. A field <= 0 is unlimited.
type Quota struct {
	// Sessions bounds the open sessions of an identity.
	Sessions int `json:"s,omitempty"`
	// Tasks bounds the tasks an identity created that are not deleted yet
	// (finished tasks count until an operator deletes them).
	Tasks int `json:"t,omitempty"`
	// Bytes bounds the payload bytes of those tasks. Checkpoint data is
	// bounded per task by the cluster's checkpoint size, so with Tasks it
	// is bounded per identity too.
	Bytes int64 `json:"b,omitempty"`
	// TotalBytes bounds the payload bytes of every limited identity's
	// tasks together: the cluster-wide budget Bytes is a share of, so
	// many identities cannot, each within its share, hold more than a
	// member can.
	TotalBytes int64 `json:"tb,omitempty"`
}

// usage is what one identity holds; derived from sessions and tasks,
// rebuilt on restore.
type usage struct {
	sessions int
	tasks    int
	bytes    int64
}

// Usage reports what owner holds: open sessions, undeleted tasks it created
// and their payload bytes.
func (m *Model) Usage(owner string) (sessions, tasks int, bytes int64) {
	if u := m.owned[owner]; u != nil {
		return u.sessions, u.tasks, u.bytes
	}
	return 0, 0, 0
}

func (m *Model) usageOf(owner string) *usage {
	u := m.owned[owner]
	if u == nil {
		u = &usage{}
		m.owned[owner] = u
	}
	return u
}

// release drops u when it holds nothing, so the map does not grow with
// every identity ever seen.
func (m *Model) dropIfEmpty(owner string) {
	if u := m.owned[owner]; u != nil && *u == (usage{}) {
		delete(m.owned, owner)
	}
}

// sessionScoped lists the ops that act through a session: only the
// identity that opened the session may send them.
var sessionScoped = map[Op]bool{
	OpCloseSession: true, OpAcquire: true, OpClaim: true, OpCheckpoint: true,
	OpWait: true, OpRelease: true, OpIntent: true,
}

// checkOwner refuses a session-scoped command from an identity other than
// the session's owner. Commands without an owner (proposed by the leader
// itself, or by a caller the API trusts with every session) and sessions
// opened before owners existed are not checked.
func (m *Model) checkOwner(c *Command) error {
	if c.Owner == "" {
		return nil
	}
	sid := c.SessionID
	if c.Op == OpOutcome {
		// An outcome names no session: it belongs to the holder of the
		// lease the intent was recorded under.
		t, ok := m.tasks[c.TaskID]
		if !ok {
			return nil // the op reports the missing task
		}
		l := t.leaseWithEpoch(c.Epoch)
		if l == nil {
			return nil // the op reports the stale epoch
		}
		sid = l.SessionID
		if _, ok := m.sessions[sid]; !ok {
			return fmt.Errorf("%w: the session that recorded the intent is closed", ErrNotOwner)
		}
	} else if !sessionScoped[c.Op] {
		return nil
	}
	if s, ok := m.sessions[sid]; ok && s.Owner != "" && s.Owner != c.Owner {
		return ErrNotOwner
	}
	return nil
}

// admitSession refuses a new session past the owner's session quota.
func (m *Model) admitSession(c *Command) error {
	if c.Quota == nil || c.Quota.Sessions <= 0 || c.Owner == "" {
		return nil
	}
	if u := m.owned[c.Owner]; u != nil && u.sessions >= c.Quota.Sessions {
		return fmt.Errorf("%w: %s has %d open sessions, the limit", ErrQuota, c.Owner, u.sessions)
	}
	return nil
}

// admitTask refuses a new task past the owner's task or byte quota.
func (m *Model) admitTask(c *Command) error {
	if c.Quota == nil || c.Owner == "" {
		return nil
	}
	u := m.owned[c.Owner]
	if u == nil {
		u = &usage{}
	}
	if q := c.Quota.Tasks; q > 0 && u.tasks >= q {
		return fmt.Errorf("%w: %s has %d tasks, the limit (delete finished ones)", ErrQuota, c.Owner, u.tasks)
	}
	if q := c.Quota.Bytes; q > 0 && u.bytes+int64(len(c.Payload)) > q {
		return fmt.Errorf("%w: %s holds %d payload bytes, limit %d", ErrQuota, c.Owner, u.bytes, q)
	}
	if q := c.Quota.TotalBytes; q > 0 && len(c.Payload) > 0 && m.ownedBytes+int64(len(c.Payload)) > q {
		return fmt.Errorf("%w: the cluster's payload budget is used up (%d of %d bytes held by all identities)", ErrQuota, m.ownedBytes, q)
	}
	return nil
}

func (m *Model) countSession(s *Session, delta int) {
	if s.Owner == "" {
		return
	}
	m.usageOf(s.Owner).sessions += delta
	m.dropIfEmpty(s.Owner)
}

func (m *Model) countTask(t *Task, delta int) {
	if t.Owner == "" {
		return
	}
	u := m.usageOf(t.Owner)
	u.tasks += delta
	u.bytes += int64(delta) * int64(len(t.Payload))
	m.ownedBytes += int64(delta) * int64(len(t.Payload))
	m.dropIfEmpty(t.Owner)
}
