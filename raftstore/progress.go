package raftstore

import (
	"time"

	"github.com/fencepost/fencepost/fence/lease"
)

// The progress deadline (DESIGN.md 17): a profile's ProgressTimeout bounds
// how long a lease may show no progress. Progress is a checkpoint (applied
// through this leader) or a progress mark the sidecar carries in its next
// heartbeat (api.HeldLease.SinceProgressMs): neither costs a raft write of
// its own, because the leader keeps the last progress in the lessor's
// memory beside the lease's deadline. A stalled lease then goes the
// ordinary way, proposed by the expiry loop: suspect (reason stalled),
// expired, resume guard, reclaimed.
//
// Leader change: like a deadline, the progress clock is not replicated. A
// new leader counts every live lease as having progressed at its
// promotion (etcd's lessor does the same with expiries), so it can reclaim
// nothing that progressed in time under the old leader; a stall is then
// found at most one progress timeout late.

// stallLimits is what the lessor needs of a lease's profile: its progress
// timeout (0: none) and its heartbeat interval, the longest a progress mark
// may take to reach the leader.
type stallLimits struct {
	timeout, report time.Duration
}

// stallLimitsFunc resolves a task's profile name into its stallLimits.
type stallLimitsFunc func(profile string) stallLimits

// profileStallLimits resolves profile names from the configuration; a
// name no longer configured has no progress deadline.
func profileStallLimits(profiles map[string]Profile) stallLimitsFunc {
	return func(name string) stallLimits {
		p, ok := profiles[name]
		if !ok {
			return stallLimits{}
		}
		return stallLimits{timeout: p.ProgressTimeout, report: p.Heartbeat}
	}
}

// progressed records that lease k showed progress at at; progress never
// moves back. It does nothing on a node that is not leading.
func (l *lessor) progressed(k leaseKey, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.progressedLocked(k, at)
}

func (l *lessor) progressedLocked(k leaseKey, at time.Time) {
	if !l.leading {
		return
	}
	tr := l.deadlines[k]
	if at.After(tr.progress) {
		tr.progress = at
		l.deadlines[k] = tr
	}
}

// limitsLocked returns lease ls's stall limits, resolving and caching them
// in tr the first time (a profile lookup per lease, not per tick).
func (l *lessor) limitsLocked(tr *tracked, profile func(task string) (string, bool), task string) stallLimits {
	if tr.limits == nil {
		var v stallLimits
		if l.stallOf != nil && profile != nil {
			if name, ok := profile(task); ok {
				v = l.stallOf(name)
			}
		}
		tr.limits = l.limits.of(v)
	}
	return *tr.limits
}

// limitsOf returns tr's stall limits; none before they are resolved.
func limitsOf(tr tracked) stallLimits {
	if tr.limits == nil {
		return stallLimits{}
	}
	return *tr.limits
}

// lastProgressLocked is the progress an active lease is judged by: its
// latest mark or checkpoint, its grant, or this leader's promotion,
// whichever is latest.
func (l *lessor) lastProgressLocked(ls *lease.Lease, tr tracked) time.Time {
	last := ls.AcquiredAt.Time()
	if tr.progress.After(last) {
		last = tr.progress
	}
	if l.promotedAt.After(last) {
		last = l.promotedAt
	}
	return last
}

// stalledLocked reports whether an active lease has shown no progress for
// longer than its progress timeout at now.
func (l *lessor) stalledLocked(ls *lease.Lease, tr tracked, now time.Time) bool {
	timeout := limitsOf(tr).timeout
	return timeout > 0 && now.After(l.lastProgressLocked(ls, tr).Add(timeout))
}

// stallExpiryLocked is when a lease suspected of stalling expires: the
// grace, plus one heartbeat interval, after the suspicion (or this
// leader's promotion). The extra interval lets a mark made before the
// progress deadline reach the leader with the next heartbeat and revive
// the lease, so a worker that progressed in time never loses it.
func (l *lessor) stallExpiryLocked(ls *lease.Lease, tr tracked) time.Time {
	from := ls.StatusAt.Time()
	if l.promotedAt.After(from) {
		from = l.promotedAt
	}
	return from.Add(l.grace + limitsOf(tr).report)
}

// stallCleared reports whether a lease suspected of stalling has shown
// progress since the last progress its suspicion was based on, which is at
// most its progress timeout before the suspicion; only then may a
// heartbeat revive it. A new leader's promotion is not progress.
func (l *lessor) stallCleared(ls lease.Lease, limits stallLimits) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	tr := l.deadlines[leaseKey{ls.TaskID, ls.Epoch}]
	return !tr.progress.IsZero() && tr.progress.After(ls.StatusAt.Time().Add(-limits.timeout))
}

// progressAt returns the moment lease ls's progress deadline counts from
// on this leader (lastProgressLocked); zero on a node not leading.
func (l *lessor) progressAt(ls lease.Lease) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.leading {
		return time.Time{}
	}
	return l.lastProgressLocked(&ls, l.deadlines[leaseKey{ls.TaskID, ls.Epoch}])
}
