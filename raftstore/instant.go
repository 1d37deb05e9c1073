package raftstore

import "time"

// instant is a moment on the leader's clock kept in the lessor's
// per-lease entries: nanoseconds since the lessor's base, 0 for none.
//
// The entries exist for every live lease, so they are kept small (8
// bytes against a time.Time's 24), and they must keep what the
// time.Time gave: immunity to wall-clock steps. A time.Time from the real
// clock carries a monotonic reading; t.Sub(base) of two such readings is
// their monotonic difference, and base.Add(offset) carries a monotonic
// reading again, so an instant compares with the clock's now exactly as
// the time.Time it came from did. Only leader-clock times (now, a
// heartbeat's arrival, a command's stamp, and times derived from them by
// Add) are made instants; a replicated Stamp, which has no monotonic
// reading, stays a Stamp and is compared as one.
type instant int64

// instantOf returns t as an instant of l; the zero time is none. The one
// moment that would be 0 (base itself) is kept as 1 ns later, which no
// deadline or progress comparison can notice.
func (l *lessor) instantOf(t time.Time) instant {
	if t.IsZero() {
		return 0
	}
	if i := instant(t.Sub(l.base)); i != 0 {
		return i
	}
	return 1
}

// timeOf returns the moment of i, carrying the base's monotonic reading;
// the zero time for none.
func (l *lessor) timeOf(i instant) time.Time {
	if i == 0 {
		return time.Time{}
	}
	return l.base.Add(time.Duration(i))
}

// limitsTable interns stall limits: every lease of a profile points at
// one value, so an entry holds a pointer, not the limits. It holds one
// value per distinct limits ever configured, a handful. Guarded by the
// lessor's mu.
type limitsTable struct {
	m map[stallLimits]*stallLimits
}

// of returns the shared copy of v.
func (t *limitsTable) of(v stallLimits) *stallLimits {
	if p, ok := t.m[v]; ok {
		return p
	}
	if t.m == nil {
		t.m = map[stallLimits]*stallLimits{}
	}
	p := &v
	t.m[v] = p
	return p
}
