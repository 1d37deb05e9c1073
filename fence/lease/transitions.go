package lease

import "fmt"

func (m *Model) openSession(c *Command) Result {
	if c.SessionID == "" || c.WorkerID == "" {
		return Result{Err: fmt.Errorf("%w: session and worker ids are required", ErrInvalid)}
	}
	if s, ok := m.sessions[c.SessionID]; ok {
		if s.Owner != c.Owner {
			return Result{Err: ErrNotOwner}
		}
		if s.WorkerID != c.WorkerID {
			return Result{Err: fmt.Errorf("%w: session id in use by another worker", ErrInvalid)}
		}
		return Result{}
	}
	if err := m.admitSession(c); err != nil {
		return Result{Err: err}
	}
	s := &Session{ID: c.SessionID, WorkerID: c.WorkerID, Owner: c.Owner, CreatedAt: c.at()}
	m.sessions[c.SessionID] = s
	m.countSession(s, 1)
	return Result{}
}

// closeSession ends a session; its active leases are given back so the tasks
// are claimable at once, while leases already suspect_dead or expired keep
// going through reclaim (their holder was not known to be done). A suspect
// lease is expired on the way: no heartbeat of the closed session can
// revive it any more, and a later session opened under the same id, by
// whichever worker, must not inherit it with its epoch (I2).
func (m *Model) closeSession(c *Command) Result {
	if _, ok := m.sessions[c.SessionID]; !ok {
		return Result{Err: ErrSessionNotFound}
	}
	var res Result
	// Backwards, because ending a lease moves the session's last held
	// task into its slot, and that one has been visited already.
	for i := len(m.held[c.SessionID]) - 1; i >= 0; i-- {
		t := m.writable(m.held[c.SessionID][i])
		switch t.Lease.Status {
		case StatusActive:
			m.endLease(t, StatusReleased, c, sessionClosedReason)
			m.makeClaimable(t, c)
			res.Released = append(res.Released, *t.Lease)
		case StatusSuspectDead:
			t.Lease.Status, t.Lease.StatusAt, t.Lease.Reason = StatusExpired, c.at(), "session closed while suspect"
			t.UpdatedAt = c.at()
		}
	}
	m.countSession(m.sessions[c.SessionID], -1)
	delete(m.sessions, c.SessionID)
	return res
}

func (m *Model) createTask(c *Command) Result {
	if c.TaskID == "" || c.TTL <= 0 {
		return Result{Err: fmt.Errorf("%w: task id and ttl are required", ErrInvalid)}
	}
	if t, ok := m.tasks[c.TaskID]; ok {
		return Result{Err: ErrTaskExists, Task: t.clone()}
	}
	if err := m.admitTask(c); err != nil {
		return Result{Err: err}
	}
	t := m.newTask(c)
	return Result{Task: t.clone()}
}

func (m *Model) newTask(c *Command) *Task {
	t := &Task{
		ID: c.TaskID, Profile: c.Profile, TTL: c.TTL, Heartbeat: c.Heartbeat,
		Priority: c.Priority, Payload: c.Payload, State: TaskPending,
		CreatedAt: c.at(), UpdatedAt: c.at(), ClaimableAt: c.at(), Owner: c.Owner, gen: m.gen,
	}
	m.tasks[t.ID] = t
	m.countTask(t, 1)
	m.queue.push(t)
	return t
}

// acquire grants the named task to the session. Acquiring a task the same
// session already holds returns that lease unchanged: a retried acquire must
// not mint a second epoch for the same holder.
func (m *Model) acquire(index uint64, c *Command) Result {
	s, ok := m.sessions[c.SessionID]
	if !ok {
		return Result{Err: ErrSessionNotFound}
	}
	t, ok := m.task(c.TaskID)
	if !ok {
		if !c.Create || c.TTL <= 0 {
			return Result{Err: ErrTaskNotFound}
		}
		if err := m.admitTask(c); err != nil {
			return Result{Err: err}
		}
		t = m.newTask(c)
	}
	switch {
	case t.State.Final():
		return Result{Err: ErrTaskFinal, Task: t.clone()}
	case t.State == TaskWaiting:
		return Result{Err: ErrTaskWaiting, Task: t.clone()}
	case t.State == TaskLeased:
		l := t.Lease
		if l.SessionID == s.ID && l.Status == StatusActive {
			return Result{Task: t.clone(), Lease: t.leaseWithEpoch(l.Epoch)}
		}
		if l.Status == StatusActive {
			return Result{Err: ErrLeaseHeld, Task: t.clone()}
		}
		// suspect_dead or expired: not through the resume guard yet.
		return Result{Err: ErrNotClaimable, Task: t.clone()}
	}
	m.grant(index, t, s, c)
	return Result{Task: t.clone(), Lease: t.leaseWithEpoch(index)}
}

// claim grants the most urgent claimable task: highest priority, then the
// one claimable longest, then the smallest id.
func (m *Model) claim(index uint64, c *Command) Result {
	s, ok := m.sessions[c.SessionID]
	if !ok {
		return Result{Err: ErrSessionNotFound}
	}
	t := m.queue.peek()
	if t == nil {
		return Result{Err: ErrNoTask}
	}
	t = m.writable(t)
	m.grant(index, t, s, c)
	return Result{Task: t.clone(), Lease: t.leaseWithEpoch(index)}
}

func (m *Model) grant(index uint64, t *Task, s *Session, c *Command) {
	if t.Lease != nil {
		x := t.More()
		x.History = append(x.History, *t.Lease)
		if len(x.History) > HistoryLimit {
			x.History = append(x.History[:0:0], x.History[len(x.History)-HistoryLimit:]...)
		}
	}
	m.unhold(t) // a no-op: only a task whose lease is over is granted
	t.Lease = &Lease{
		TaskID: t.ID, WorkerID: s.WorkerID, SessionID: s.ID, Epoch: index,
		AcquiredAt: c.at(), ExpiresAt: c.at().Add(t.TTL), HeartbeatAt: c.at(), TTL: t.TTL,
		Status: StatusActive, StatusAt: c.at(),
	}
	if c.LeaseID != "" {
		t.Lease.SetID(c.LeaseID)
	}
	t.MaxEpoch = index
	t.State = TaskLeased
	t.Attempts++
	t.UpdatedAt = c.at()
	m.queue.remove(t)
	m.hold(t)
}

// holderLease returns the task's lease if the command names its current
// epoch, comes from its session, and the lease is active.
func (m *Model) holderLease(c *Command) (*Task, *Lease, error) {
	t, ok := m.task(c.TaskID)
	if !ok {
		return nil, nil, ErrTaskNotFound
	}
	l := t.Lease
	if l == nil || l.Epoch != c.Epoch {
		return t, nil, ErrStaleEpoch
	}
	if c.SessionID != "" && l.SessionID != c.SessionID {
		return t, nil, ErrNotHolder
	}
	if l.Status != StatusActive {
		return t, nil, fmt.Errorf("%w: %s", ErrLeaseNotActive, l.Status)
	}
	return t, l, nil
}

func (m *Model) checkpoint(c *Command) Result {
	t, l, err := m.holderLease(c)
	if err != nil {
		return Result{Err: err, Task: cloneOrNil(t)}
	}
	seq := c.Seq
	var prev uint64
	if t.Checkpoint != nil {
		prev = t.Checkpoint.Seq
	}
	if seq == 0 {
		// Never wrap: at the ceiling there is no next seq.
		if prev >= MaxCheckpointSeq {
			return Result{Err: fmt.Errorf("%w: seq reached its ceiling %d", ErrCheckpointSeq, uint64(MaxCheckpointSeq)), Task: t.clone()}
		}
		seq = prev + 1
	} else if seq <= prev {
		return Result{Err: fmt.Errorf("%w: have %d, got %d", ErrCheckpointSeq, prev, seq), Task: t.clone()}
	} else if err := CheckCheckpointSeq(seq); err != nil {
		return Result{Err: err, Task: t.clone()}
	} else if err := CheckCheckpointSeqJump(prev, seq, c.SeqWindow); err != nil {
		return Result{Err: err, Task: t.clone()}
	}
	t.Checkpoint = &Checkpoint{Seq: seq, Step: c.Step, Data: c.Data, Epoch: l.Epoch, At: c.at()}
	t.UpdatedAt = c.at()
	return Result{Task: t.clone(), Lease: t.leaseWithEpoch(l.Epoch)}
}

// wait closes the lease (the worker is free) and parks the task until a
// signal or the deadline; the next grant gets a new epoch.
func (m *Model) wait(c *Command) Result {
	t, l, err := m.holderLease(c)
	if err != nil {
		return Result{Err: err, Task: cloneOrNil(t)}
	}
	m.endLease(t, StatusPausedWaiting, c, c.Reason)
	t.State = TaskWaiting
	// The signal answers the previous wait; it stays with the task (for the
	// owner after the signal, and any owner after a reclaim) until the next.
	x := t.More()
	x.WaitDeadline, x.Signal = c.Deadline, nil
	t.tidy()
	return Result{Task: t.clone(), Lease: t.leaseWithEpoch(l.Epoch)}
}

func (m *Model) signal(c *Command) Result {
	t, ok := m.task(c.TaskID)
	if !ok {
		return Result{Err: ErrTaskNotFound}
	}
	if t.State != TaskWaiting {
		return Result{Err: ErrNotWaiting, Task: t.clone()}
	}
	// A deadline signal proposed by the leader carries the epoch of the
	// paused lease, so a stale one cannot wake a task that waits again.
	if c.Epoch != 0 && (t.Lease == nil || t.Lease.Epoch != c.Epoch) {
		return Result{Err: ErrStaleEpoch, Task: t.clone()}
	}
	x := t.More()
	x.Signal, x.Reason, x.WaitDeadline = c.Payload, c.Reason, 0
	t.tidy()
	m.makeClaimable(t, c)
	return Result{Task: t.clone()}
}

// release ends the holder's lease. It is accepted from suspect_dead too: no
// other owner was let in, so the holder finishing is still the only history.
func (m *Model) release(c *Command) Result {
	t, ok := m.task(c.TaskID)
	if !ok {
		return Result{Err: ErrTaskNotFound}
	}
	l := t.Lease
	if l == nil || l.Epoch != c.Epoch {
		return Result{Err: ErrStaleEpoch, Task: t.clone()}
	}
	if c.SessionID != "" && l.SessionID != c.SessionID {
		return Result{Err: ErrNotHolder, Task: t.clone()}
	}
	if l.Status != StatusActive && l.Status != StatusSuspectDead {
		return Result{Err: fmt.Errorf("%w: %s", ErrLeaseNotActive, l.Status), Task: t.clone()}
	}
	m.endLease(t, StatusReleased, c, c.Reason)
	switch c.Outcome {
	case OutcomeCompleted:
		t.State = TaskCompleted
		t.setResult(c.Result)
	case OutcomeFailed:
		t.State = TaskFailed
		t.setResult(c.Result)
		t.setReason(c.Reason)
	default:
		m.makeClaimable(t, c)
	}
	return Result{Task: t.clone(), Lease: t.leaseWithEpoch(l.Epoch)}
}

// revoke takes the lease away (operator or detected conflict). Epoch 0
// revokes whatever lease is live. The task becomes claimable.
func (m *Model) revoke(c *Command) Result {
	t, ok := m.task(c.TaskID)
	if !ok {
		return Result{Err: ErrTaskNotFound}
	}
	l := t.Lease
	if l == nil || !l.Status.Live() {
		return Result{Err: fmt.Errorf("%w: no live lease", ErrLeaseNotActive), Task: t.clone()}
	}
	if c.Epoch != 0 && l.Epoch != c.Epoch {
		return Result{Err: ErrStaleEpoch, Task: t.clone()}
	}
	m.endLease(t, StatusRevoked, c, c.Reason)
	m.makeClaimable(t, c)
	return Result{Task: t.clone(), Lease: t.leaseWithEpoch(l.Epoch)}
}

func (m *Model) cancel(c *Command) Result {
	t, ok := m.task(c.TaskID)
	if !ok {
		return Result{Err: ErrTaskNotFound}
	}
	if t.State.Final() {
		return Result{Err: ErrTaskFinal, Task: t.clone()}
	}
	var lease *Lease
	if l := t.Lease; l != nil && l.Status.Live() {
		m.endLease(t, StatusRevoked, c, c.Reason)
		lease = t.leaseWithEpoch(l.Epoch)
	}
	m.queue.remove(t)
	t.State = TaskCancelled
	t.setReason(c.Reason)
	t.UpdatedAt = c.at()
	return Result{Task: t.clone(), Lease: lease}
}

func (m *Model) deleteTask(c *Command) Result {
	t, ok := m.tasks[c.TaskID] // read only: the task is dropped, not changed
	if !ok {
		return Result{Err: ErrTaskNotFound}
	}
	if !t.State.Final() {
		return Result{Err: fmt.Errorf("%w: only completed, failed or cancelled tasks can be deleted", ErrInvalid), Task: t.clone()}
	}
	delete(m.tasks, t.ID)
	m.countTask(t, -1)
	return Result{Task: t.clone()}
}

// endLease moves the current lease to a closed status and frees its holder.
func (m *Model) endLease(t *Task, st Status, c *Command, reason string) {
	l := t.Lease
	l.Status, l.StatusAt, l.Reason = st, c.at(), reason
	t.UpdatedAt = c.at()
	m.unhold(t)
}

func (m *Model) makeClaimable(t *Task, c *Command) {
	t.State = TaskPending
	t.ClaimableAt = c.at()
	t.UpdatedAt = c.at()
	m.queue.push(t)
}

func cloneOrNil(t *Task) *Task {
	if t == nil {
		return nil
	}
	return t.clone()
}
