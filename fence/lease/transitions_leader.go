package lease

import "fmt"

// The transitions only the leader proposes: a lease the leader found
// overdue is suspected, revived, expired and reclaimed.

// leaderLease returns the task's lease when it has the expected epoch and
// status: the guard every leader-proposed transition goes through, so a
// proposal that lost a race (the holder heartbeated, released, or a new
// grant happened) is a harmless no-op.
func (m *Model) leaderLease(c *Command, want Status) (*Task, *Lease, error) {
	t, ok := m.task(c.TaskID)
	if !ok {
		return nil, nil, ErrTaskNotFound
	}
	l := t.Lease
	if l == nil || l.Epoch != c.Epoch {
		return t, nil, ErrStaleEpoch
	}
	if l.Status != want {
		return t, nil, fmt.Errorf("%w: %s", ErrLeaseNotActive, l.Status)
	}
	return t, l, nil
}

func (m *Model) suspect(c *Command) Result {
	t, l, err := m.leaderLease(c, StatusActive)
	if err != nil {
		return Result{Err: err, Task: cloneOrNil(t)}
	}
	l.Status, l.StatusAt = StatusSuspectDead, c.at()
	if c.Reason == ReasonStalled {
		// Only this reason is kept: it changes what may revive the lease
		// (progress, not a heartbeat) and what the lease ends with. Other
		// suspicions keep the record as it always was, so replicas of two
		// versions replaying one log hold the same state.
		l.Reason = ReasonStalled
	}
	t.UpdatedAt = c.at()
	return Result{Task: t.clone(), Lease: t.leaseWithEpoch(l.Epoch)}
}

// revive returns a suspect lease to its holder with the same epoch: nobody
// else was let in, so the holder's writes are still the only ones.
func (m *Model) revive(c *Command) Result {
	t, l, err := m.leaderLease(c, StatusSuspectDead)
	if err != nil {
		return Result{Err: err, Task: cloneOrNil(t)}
	}
	if c.SessionID != "" && l.SessionID != c.SessionID {
		return Result{Err: ErrNotHolder, Task: t.clone()}
	}
	l.Status, l.StatusAt = StatusActive, c.at()
	if l.Reason == ReasonStalled {
		l.Reason = "" // the holder showed progress: it is no longer stalled
	}
	l.HeartbeatAt, l.ExpiresAt = c.at(), c.at().Add(l.TTL)
	t.UpdatedAt = c.at()
	return Result{Task: t.clone(), Lease: t.leaseWithEpoch(l.Epoch)}
}

func (m *Model) expire(c *Command) Result {
	t, l, err := m.leaderLease(c, StatusSuspectDead)
	if err != nil {
		return Result{Err: err, Task: cloneOrNil(t)}
	}
	l.Status, l.StatusAt = StatusExpired, c.at()
	t.UpdatedAt = c.at()
	return Result{Task: t.clone(), Lease: t.leaseWithEpoch(l.Epoch)}
}

// reclaim is the resume guard (DESIGN.md 5): the old epoch is dead for good
// (expired), no intent of it may still be in flight, the epoch must still be
// the task's current one (nobody took over), and then the task is handed to
// the queue with its checkpoint and the in-doubt effects surfaced.
func (m *Model) reclaim(c *Command) Result {
	t, l, err := m.leaderLease(c, StatusExpired)
	if err != nil {
		return Result{Err: err, Task: cloneOrNil(t)}
	}
	var doubt []*Effect
	for _, e := range t.Journal() {
		if e.State != EffectIntent || e.Epoch != l.Epoch {
			continue
		}
		if c.at().Before(e.Deadline) {
			return Result{Err: fmt.Errorf("%w: %q until %s", ErrIntentsInFlight, e.Key, e.Deadline), Task: t.clone()}
		}
		doubt = append(doubt, e)
	}
	for _, e := range doubt {
		e.State = EffectInDoubt
	}
	why := "resume guard passed"
	if l.Reason == ReasonStalled {
		why = ReasonStalled // the lease-end reason says why it was taken back
	}
	m.endLease(t, StatusReclaimed, c, why)
	m.makeClaimable(t, c)
	res := Result{Task: t.clone(), Lease: t.leaseWithEpoch(l.Epoch)}
	for _, e := range doubt {
		res.InDoubt = append(res.InDoubt, e.clone())
	}
	return res
}
