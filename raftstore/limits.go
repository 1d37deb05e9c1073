package raftstore

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
