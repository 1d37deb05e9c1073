package lease

import "fmt"

// intent records a journaled write before it is made. It doubles as the
// linearizable "is my lease still current?" check: it commits only while
// the caller's epoch is the task's current, active one. A key the journal
// already holds is answered from the journal instead: with another body
// digest it is ErrPayloadMismatch; a done effect is replayed (even to a
// later owner); an intent with no outcome is in doubt.
func (m *Model) intent(c *Command) Result {
	if c.Effect == nil || c.Effect.Key == "" {
		return Result{Err: fmt.Errorf("%w: effect key is required", ErrInvalid)}
	}
	t, ok := m.task(c.TaskID)
	if !ok {
		return Result{Err: ErrTaskNotFound}
	}
	if e := t.effect(c.Effect.Key); e != nil {
		switch {
		case c.Effect.BodyDigest != "" && e.BodyDigest != "" && c.Effect.BodyDigest != e.BodyDigest:
			// The same key for another body: replaying the recorded
			// response would tell the worker its new payload took effect.
			return Result{Err: ErrPayloadMismatch, Task: t.clone(), Effect: e.clone()}
		case e.State == EffectDone:
			return Result{Task: t.clone(), Effect: e.clone()}
		case e.Epoch == c.Epoch && e.State == EffectIntent:
			// The same owner retrying its own intent: still one record.
			return Result{Task: t.clone(), Effect: e.clone()}
		default:
			return Result{Err: ErrInDoubt, Task: t.clone(), Effect: e.clone()}
		}
	}
	t, l, err := m.holderLease(c)
	if err != nil {
		return Result{Err: err, Task: cloneOrNil(t)}
	}
	if len(t.Journal()) >= JournalLimit && !m.compactJournal(t) {
		return Result{Err: ErrJournalFull, Task: t.clone()}
	}
	e := *c.Effect
	e.Epoch, e.State, e.RecordedAt = l.Epoch, EffectIntent, c.at()
	e.Status, e.Header, e.Body = 0, nil, nil
	t.More().Journal = append(t.Journal(), &e)
	return Result{Task: t.clone(), Effect: e.clone()}
}

// outcome records what a journaled write returned. It is accepted whatever
// the lease's state now: the call was made under a current lease, and
// forgetting its result would make a later owner repeat it.
func (m *Model) outcome(c *Command) Result {
	if c.Effect == nil || c.Effect.Key == "" {
		return Result{Err: fmt.Errorf("%w: effect key is required", ErrInvalid)}
	}
	t, ok := m.task(c.TaskID)
	if !ok {
		return Result{Err: ErrTaskNotFound}
	}
	e := t.effect(c.Effect.Key)
	if e == nil {
		return Result{Err: fmt.Errorf("%w: no intent for key", ErrInvalid), Task: t.clone()}
	}
	if e.Epoch != c.Epoch {
		return Result{Err: ErrStaleEpoch, Task: t.clone(), Effect: e.clone()}
	}
	if e.State == EffectDone {
		return Result{Task: t.clone(), Effect: e.clone()}
	}
	e.State, e.RecordedAt = EffectDone, c.at()
	e.Status, e.Header, e.Body = c.Effect.Status, c.Effect.Header, c.Effect.Body
	return Result{Task: t.clone(), Effect: e.clone()}
}

// compactJournal drops the oldest done effects to make room; intents and
// in-doubt effects are never dropped. It reports whether room was made.
func (m *Model) compactJournal(t *Task) bool {
	journal := t.Journal()
	kept := journal[:0:0]
	drop := len(journal) - JournalLimit + 1
	for _, e := range journal {
		if drop > 0 && e.State == EffectDone {
			drop--
			continue
		}
		kept = append(kept, e)
	}
	t.More().Journal = kept
	return drop == 0
}
