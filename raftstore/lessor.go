package raftstore

import (
	"fmt"
	"hash/fnv"
	"iter"
	"sync"
	"time"

	"github.com/fencepost/fencepost/fence/lease"
)

// leaseKey names one lease: renewals are tracked per (task, epoch), so a
// renewal can never leak into a later grant of the same task.
type leaseKey struct {
	task  string
	epoch uint64
}

// lessor is the leader's in-memory lease bookkeeping (DESIGN.md 4): the
// deadline of every live lease as extended by heartbeats, and the last
// heartbeat of every session. None of it is replicated; a new leader
// rebuilds it in promote by extending every live lease to now + TTL, which
// is why a renewal never has to be a raft entry. The lessor decides *when*
// to propose suspect / expire / reclaim; the model decides, by epoch,
// whether such a proposal still applies.
type lessor struct {
	mu    sync.Mutex
	clock Clock
	grace time.Duration
	// spread is the fraction of a lease's TTL by which promote may push its
	// deadline further, deterministically per lease, so leases granted in a
	// burst under the old leader do not all come due in the same tick.
	spread float64
	// idle closes sessions without a heartbeat for this long.
	idle time.Duration
	// stallOf gives a profile's progress deadline (progress.go); nil: none.
	stallOf stallLimitsFunc

	limits     limitsTable
	leading    bool
	promotedAt time.Time
	deadlines  map[leaseKey]tracked
	sessions   map[string]sessionClock
	// gen numbers plan's scans: a deadline not seen by the latest scan
	// belongs to a lease that ended and is dropped, without building a set
	// of every live lease each tick.
	gen uint64
}

// sessionClock is what the leader knows of one session's liveness.
type sessionClock struct {
	// heard is the last sign of life: an open, a heartbeat, or this
	// node's promote. Idle sessions are closed from it.
	heard time.Time
	// renewed is the arrival of the session's latest heartbeat. It renews
	// every active or suspect lease of the session to renewed + its TTL,
	// evaluated when a deadline is asked for (deadlineLocked) rather than
	// written into every lease: a heartbeat then costs the same for one
	// lease as for a hundred, and a lease granted to the session while
	// the heartbeat waits for its verify round is covered as well.
	renewed time.Time
	// closing is set when plan proposes closing the session for
	// idleness, and cleared once that proposal has been applied (or was
	// a no-op). Meanwhile renew refuses: a heartbeat acknowledged while
	// the close is in flight would leave its sidecar a deadline for
	// leases the close is about to give back.
	closing bool
}

// tracked is the in-memory deadline of one lease and the scan that last
// saw the lease live.
type tracked struct {
	at  time.Time
	gen uint64
	// progress is the lease's last progress known to this leader, zero
	// when none since it took office (progress.go).
	progress time.Time
	// limits are the lease's stall limits, shared per profile
	// (limitsTable), nil until first resolved.
	limits *stallLimits
}

func newLessor(clock Clock, grace, idle time.Duration, stallOf stallLimitsFunc) *lessor {
	return &lessor{clock: clock, grace: grace, idle: idle, spread: 0.1, stallOf: stallOf,
		deadlines: map[leaseKey]tracked{}, sessions: map[string]sessionClock{}}
}

// stagger returns the deterministic extra time promote gives lease k:
// up to spread × ttl, from a hash of the key.
func (l *lessor) stagger(k leaseKey, ttl time.Duration) time.Duration {
	window := time.Duration(float64(ttl) * l.spread)
	if window <= 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(k.task))
	var b [8]byte
	for i := range b {
		b[i] = byte(k.epoch >> (8 * i))
	}
	_, _ = h.Write(b[:])
	return time.Duration(h.Sum64() % uint64(window))
}

// extend sets k's deadline to at least d; deadlines never move back.
func (l *lessor) extend(k leaseKey, d time.Time) {
	if cur, ok := l.deadlines[k]; !ok || d.After(cur.at) {
		cur.at = d
		l.deadlines[k] = cur
	}
}

// promote takes office: every live lease gets now + TTL + its stagger
// (never less than anything already known), every open session counts as
// heard from now. Called after the new leader's barrier, so leases is the
// complete committed state.
func (l *lessor) promote(leases []lease.Lease, sessions []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	l.leading, l.promotedAt = true, now
	for _, ls := range leases {
		k := leaseKey{ls.TaskID, ls.Epoch}
		l.extend(k, now.Add(ls.TTL+l.stagger(k, ls.TTL)))
	}
	for _, s := range sessions {
		l.hearLocked(s, now)
	}
}

// hearLocked moves session's last sign of life forward to at.
func (l *lessor) hearLocked(session string, at time.Time) {
	if sc, ok := l.sessions[session]; !ok || at.After(sc.heard) {
		sc.heard = at
		l.sessions[session] = sc
	}
}

// demote drops everything: a node that is not the leader must not act on
// stale renewals, and the next leader rebuilds its own.
func (l *lessor) demote() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leading = false
	l.deadlines = map[leaseKey]tracked{}
	l.sessions = map[string]sessionClock{}
}

// renew records a heartbeat of session received at recv: the session is
// alive and every active or suspect lease it holds lives until recv + its
// TTL (sessionClock.renewed). Suspect leases are covered too, so the
// expiry loop cannot expire one whose revive is on its way. It renews
// nothing and returns ErrNotLeader on a node that is not leading, and
// lease.ErrSessionNotFound for a session whose idle close is in flight.
func (l *lessor) renew(recv time.Time, session string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.leading {
		return ErrNotLeader
	}
	sc := l.sessions[session]
	if sc.closing {
		return fmt.Errorf("raftstore: session %q is being closed (idle): %w", session, lease.ErrSessionNotFound)
	}
	if recv.After(sc.heard) {
		sc.heard = recv
	}
	if recv.After(sc.renewed) {
		sc.renewed = recv
	}
	l.sessions[session] = sc
	return nil
}

// closeDone clears the closing mark plan set on session: its close has
// been applied (the session is gone, and plan's sweep drops the entry) or
// was refused (the session stays and may heartbeat again).
func (l *lessor) closeDone(session string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if sc, ok := l.sessions[session]; ok && sc.closing {
		sc.closing = false
		l.sessions[session] = sc
	}
}

// touchSession marks a session as heard from (opened, or re-opened).
func (l *lessor) touchSession(session string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hearLocked(session, at)
}

// deadline returns the lease's effective deadline: the later of the
// in-memory renewal and the replicated ExpiresAt (set at grant and revive).
func (l *lessor) deadline(ls lease.Lease) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadlineLocked(ls)
}

func (l *lessor) deadlineLocked(ls lease.Lease) time.Time {
	d := ls.ExpiresAt.Time()
	if m, ok := l.deadlines[leaseKey{ls.TaskID, ls.Epoch}]; ok && m.at.After(d) {
		d = m.at
	}
	return l.renewedLocked(&ls, d)
}

// renewedLocked returns the later of d and the lease's renewal by its
// session's latest heartbeat (active and suspect leases only: an expired
// lease is never coming back).
func (l *lessor) renewedLocked(ls *lease.Lease, d time.Time) time.Time {
	if ls.Status != lease.StatusActive && ls.Status != lease.StatusSuspectDead {
		return d
	}
	if sc, ok := l.sessions[ls.SessionID]; ok && !sc.renewed.IsZero() {
		if r := sc.renewed.Add(ls.TTL); r.After(d) {
			return r
		}
	}
	return d
}

// lastHeartbeat returns the session's last heartbeat as the leader saw it.
func (l *lessor) lastHeartbeat(session string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sc, ok := l.sessions[session]
	return sc.heard, ok
}

// expiryInput is what the expiry loop shows the lessor each tick. The
// scans are the model's own leases (lease.Model.LiveScan), read under the
// FSM's read lock, so a tick allocates nothing per lease.
type expiryInput struct {
	// Leases yields every live lease.
	Leases iter.Seq[*lease.Lease]
	// IntentsUntil returns, for an expired lease, the latest deadline of
	// its epoch's in-flight journaled intents: the resume guard cannot
	// pass before it, so proposing a reclaim earlier would only fill the
	// log. Nil means none.
	IntentsUntil func(task string, epoch uint64) (time.Time, bool)
	// Waiting maps a task whose wait deadline passed to its paused epoch.
	Waiting map[string]uint64
	// Sessions yields every open session id.
	Sessions iter.Seq[string]
	// Profile returns a task's profile name, for its progress deadline
	// (looked up once per lease). Nil: no progress deadlines.
	Profile func(task string) (string, bool)
}

// plan decides the leader's proposals for this tick, at most limit of
// them: suspect an active lease past its deadline, expire a suspect one
// past deadline + grace, reclaim an expired one once its intents are out,
// signal overdue waits, close idle sessions. Every command carries the
// epoch it expects, so one that loses a race is a no-op in the model.
// Leases are visited in map order; when more than limit are due, the rest
// are proposed by the following ticks.
func (l *lessor) plan(in expiryInput, limit int) []lease.Command {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.leading {
		return nil
	}
	now := l.clock.Now()
	var out []lease.Command
	add := func(c lease.Command) {
		c.Time = now
		out = append(out, c)
	}
	l.gen++
	if in.Leases != nil {
		for ls := range in.Leases {
			k := leaseKey{ls.TaskID, ls.Epoch}
			tr, ok := l.deadlines[k]
			if !ok {
				// Granted since promote: its replicated ExpiresAt is the
				// grant time + TTL stamped by this leader.
				tr.at = ls.ExpiresAt.Time()
			}
			tr.gen = l.gen
			l.limitsLocked(&tr, in.Profile, ls.TaskID)
			l.deadlines[k] = tr
			if len(out) >= limit {
				continue // keep marking, so the sweep below stays right
			}
			d := ls.ExpiresAt.Time()
			if tr.at.After(d) {
				d = tr.at
			}
			// The session's renewal is looked up only for a lease that
			// looks due without it: most leases are not, and the tick
			// then costs one map access per lease.
			switch ls.Status {
			case lease.StatusActive:
				if now.After(d) && now.After(l.renewedLocked(ls, d)) {
					add(lease.Command{Op: lease.OpSuspect, TaskID: ls.TaskID, Epoch: ls.Epoch, Reason: "heartbeat overdue"})
				} else if l.stalledLocked(ls, tr, now) {
					add(lease.Command{Op: lease.OpSuspect, TaskID: ls.TaskID, Epoch: ls.Epoch, Reason: lease.ReasonStalled})
				}
			case lease.StatusSuspectDead:
				if ls.Reason == lease.ReasonStalled {
					// Heartbeats do not save a stalled lease (its sidecar
					// is alive; its worker shows nothing): only progress
					// does, through a revive in the heartbeat path.
					if now.After(l.stallExpiryLocked(ls, tr)) {
						add(lease.Command{Op: lease.OpExpire, TaskID: ls.TaskID, Epoch: ls.Epoch, Reason: lease.ReasonStalled})
					}
					continue
				}
				if now.After(d.Add(l.grace)) && now.After(l.renewedLocked(ls, d).Add(l.grace)) {
					add(lease.Command{Op: lease.OpExpire, TaskID: ls.TaskID, Epoch: ls.Epoch, Reason: "grace over"})
				}
			case lease.StatusExpired:
				if in.IntentsUntil != nil {
					if until, ok := in.IntentsUntil(ls.TaskID, ls.Epoch); ok && now.Before(until) {
						continue
					}
				}
				add(lease.Command{Op: lease.OpReclaim, TaskID: ls.TaskID, Epoch: ls.Epoch})
			}
		}
	}
	// Forget deadlines of leases that are no longer live.
	for k, tr := range l.deadlines {
		if tr.gen != l.gen {
			delete(l.deadlines, k)
		}
	}
	if len(out) >= limit {
		return out[:limit]
	}
	for task, epoch := range in.Waiting {
		if len(out) >= limit {
			return out
		}
		add(lease.Command{Op: lease.OpSignal, TaskID: task, Epoch: epoch, Reason: "wait deadline passed"})
	}
	if in.Sessions == nil {
		return out
	}
	open := make(map[string]bool, len(l.sessions))
	for s := range in.Sessions {
		open[s] = true
		sc, ok := l.sessions[s]
		if !ok {
			l.sessions[s] = sessionClock{heard: now}
			continue
		}
		if now.Sub(sc.heard) > l.idle && len(out) < limit {
			add(lease.Command{Op: lease.OpCloseSession, SessionID: s, Reason: "session idle"})
			sc.closing = true
			l.sessions[s] = sc
		}
	}
	// A closed session's entry goes here, under the FSM's read lock, and
	// not when its close returns: by then the id may be open again, with a
	// renewal already acknowledged.
	for s := range l.sessions {
		if !open[s] {
			delete(l.sessions, s)
		}
	}
	return out
}
