package lease

// hold adds t, whose lease has just become live, to its session's held
// tasks.
func (m *Model) hold(t *Task) {
	sid := t.Lease.SessionID
	m.held[sid] = append(m.held[sid], t)
	t.held = len(m.held[sid])
}

// unhold removes t, whose lease has just stopped being live, from its
// session's held tasks: the session's last task takes its slot. A task
// not held is left alone.
func (m *Model) unhold(t *Task) {
	if t.held == 0 {
		return
	}
	sid := t.Lease.SessionID
	set := m.held[sid]
	i, last := t.held-1, len(set)-1
	if i > last || set[i] != t {
		// Every change of a held task goes through writable, which keeps
		// the slot pointing at the current copy, so this cannot happen;
		// were it to, finding the task is slower but still right.
		i = -1
		for j, h := range set {
			if h.ID == t.ID {
				i = j
				break
			}
		}
		if i < 0 {
			t.held = 0
			return
		}
	}
	// The moved task is changed, if only in its slot number, so it is
	// made writable first: a snapshot view may be copying it right now.
	// writable points set[last] at the copy.
	moved := m.writable(set[last])
	set[i] = moved
	moved.held = i + 1
	set[last] = nil
	t.held = 0
	if last == 0 {
		delete(m.held, sid)
		return
	}
	m.held[sid] = set[:last]
}
