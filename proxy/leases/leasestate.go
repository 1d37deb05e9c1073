package leases

import (
	"io"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// Reason says why a task has no current lease; it picks the problem type
// of a blocked write.
type Reason string

const (
	ReasonNone     Reason = "none"     // never held, or unknown task
	ReasonExpired  Reason = "expired"  // local deadline passed, or the cluster expired it
	ReasonSuspect  Reason = "suspect"  // the cluster reports suspect_dead
	ReasonRevoked  Reason = "revoked"  // revoked by an operator or a conflict
	ReasonWaiting  Reason = "waiting"  // parked by a wait
	ReasonReleased Reason = "released" // completed, failed or given back
	ReasonLost     Reason = "lost"     // superseded, or the session died
	ReasonAmbig    Reason = "ambiguous"
)

// Reasons lists every reason, for metrics that show each from the start.
func Reasons() []Reason {
	return []Reason{ReasonNone, ReasonExpired, ReasonSuspect, ReasonRevoked, ReasonWaiting, ReasonReleased, ReasonLost, ReasonAmbig}
}

// phase is where a held lease stands in the sidecar's view.
type phase uint8

const (
	// phaseCurrent: granted or renewed; writes may go until the deadline.
	phaseCurrent phase = iota
	// phaseLapsed: the local deadline passed (the watchdog cut what was
	// in flight, or a renewal came too late). A renewal of the same epoch
	// that arrives in time revives it.
	phaseLapsed
	// phaseBlocked: the cluster reports the lease not active (suspect_dead,
	// or a grant that came back inactive); why says which. A renewal of
	// the same epoch revives it.
	phaseBlocked
	// phaseEnding: the worker's release or wait is in flight; why says
	// which. It ends in phaseGone (the call committed) or back where it
	// was (the call failed).
	phaseEnding
	// phaseGone: the lease left the table; why says why. Requests and
	// connections that still point at it are refused.
	phaseGone
)

// leaseState is the state of one held lease: its phase, its local
// deadline (the only copy) and its generation — the connections and
// tunnels carrying its writes while it is current. Transitions are its
// methods; mayWrite is the one place that decides whether a write may
// leave. It has its own mutex because the connections carrying the
// lease's writes ask it before every socket write.
type leaseState struct {
	mu        sync.Mutex
	phase     phase
	why       Reason // for phaseBlocked, phaseEnding and phaseGone
	before    phase  // where an ending returns when the call fails
	beforeWhy Reason
	deadline  time.Time // monotonic; writes stop at this instant
	gen       uint64    // incremented each time the lease becomes current
	conns     map[io.Closer]bool
	client    *fasthttp.Client // write client of gen; its connections are in conns
}

// Ticket is the right to write under one generation of a lease. A
// request takes one when it is decided and checks it again before it is
// sent; a write connection carries one for its whole life.
type Ticket struct {
	st  *leaseState
	gen uint64
}

// mayWrite is the one function that decides whether a write under
// generation gen of this lease may leave at now, and if not, why
// (DESIGN.md 4.2): the lease must be current, the generation the caller
// holds must still be its generation, and now must be before the local
// deadline. Every check of a request, the re-check before the send, every
// socket write of a write connection, the watchdog and the lease view all
// ask it. The deadline itself is compared in pastDeadline only.
func (s *leaseState) mayWrite(now time.Time, gen uint64) Reason {
	switch s.phase {
	case phaseBlocked, phaseEnding, phaseGone:
		return s.why
	case phaseLapsed:
		return ReasonExpired
	}
	if gen != s.gen {
		return ReasonExpired // that generation was cut; a newer one is not the caller's
	}
	if s.pastDeadline(now) {
		return ReasonExpired
	}
	return ""
}

// pastDeadline is the one comparison of now with the local deadline: both
// whether a write may leave (mayWrite) and which phase a renewed, regranted
// or un-held lease lands in (settle) ask it. The deliberately broken build
// (fencepost_broken_nodeadline) makes it always false, so that build's
// sidecar never lets a lease lapse on its own.
func (s *leaseState) pastDeadline(now time.Time) bool {
	return !DeadlineCheckDisabled && !now.Before(s.deadline)
}

// MayWrite asks the ticket's lease whether a write may leave at now.
func (t Ticket) MayWrite(now time.Time) Reason {
	if t.st == nil {
		return ReasonNone
	}
	t.st.mu.Lock()
	defer t.st.mu.Unlock()
	return t.st.mayWrite(now, t.gen)
}

// check returns the lease's current generation and whether a write under
// it may leave at now.
func (s *leaseState) check(now time.Time) (Ticket, Reason) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Ticket{st: s, gen: s.gen}, s.mayWrite(now, s.gen)
}

// severed is what a transition out of phaseCurrent took away: the
// generation's connections and tunnels and its write client, for the
// caller to close outside the lock.
type severed struct {
	conns  map[io.Closer]bool // value: is a tunnel
	client *fasthttp.Client
}

// close closes everything severed and returns how many tunnels it closed.
func (c severed) close() (tunnels int) {
	for cl, tunnel := range c.conns {
		_ = cl.Close()
		if tunnel {
			tunnels++
		}
	}
	if c.client != nil {
		c.client.CloseIdleConnections()
	}
	return tunnels
}

// enter moves to phase p. Entering phaseCurrent starts a new generation;
// leaving it severs the old one. s.mu must be held.
func (s *leaseState) enter(p phase, why Reason) severed {
	var cut severed
	if s.phase == phaseCurrent && p != phaseCurrent {
		cut = severed{conns: s.conns, client: s.client}
		s.conns, s.client = nil, nil
	}
	if p == phaseCurrent && s.phase != phaseCurrent {
		s.gen++
	}
	s.phase, s.why = p, why
	return cut
}

// newLeaseState is the state of a lease just granted with the given
// deadline; blocked is the reason when the grant came back not active.
func newLeaseState(deadline time.Time, blocked Reason, now time.Time) *leaseState {
	s := &leaseState{phase: phaseLapsed, deadline: deadline}
	s.phase = s.settle(blocked, now)
	if s.phase == phaseCurrent {
		s.gen = 1
	}
	return s
}

// settle is the phase a lease the cluster calls active (blocked "") or
// not (blocked the reason) is in at now.
func (s *leaseState) settle(blocked Reason, now time.Time) phase {
	switch {
	case blocked != "":
		return phaseBlocked
	case !s.pastDeadline(now):
		return phaseCurrent
	}
	return phaseLapsed
}

// regranted applies the same grant received again (a retried acquire):
// the deadline only moves later, and a generation that stays current
// keeps its connections.
func (s *leaseState) regranted(deadline time.Time, blocked Reason, now time.Time) severed {
	s.mu.Lock()
	defer s.mu.Unlock()
	if deadline.After(s.deadline) {
		s.deadline = deadline
	}
	return s.enter(s.settle(blocked, now), blocked)
}

// renewed applies a heartbeat reply that calls the lease active with the
// given deadline. A lapsed or blocked lease comes back (revived) when the
// new deadline is still ahead; an ending one only keeps its deadline.
func (s *leaseState) renewed(deadline time.Time, now time.Time) (EventKind, severed) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if deadline.After(s.deadline) {
		s.deadline = deadline
	}
	switch s.phase {
	case phaseEnding, phaseGone, phaseCurrent:
		return "", severed{}
	}
	p := s.settle("", now)
	cut := s.enter(p, "")
	if p == phaseCurrent {
		return EventRevived, cut
	}
	return "", cut
}

// suspected applies a heartbeat reply that calls the lease suspect_dead:
// still ours, blocked until a renewal revives it. It reports lost when
// the lease was current until now. An ending lease ignores it.
func (s *leaseState) suspected(now time.Time) (EventKind, severed) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.phase == phaseEnding || s.phase == phaseGone {
		return "", severed{}
	}
	wasCurrent := s.mayWrite(now, s.gen) == ""
	cut := s.enter(phaseBlocked, ReasonSuspect)
	if wasCurrent {
		return EventLost, cut
	}
	return "", cut
}

// lapse moves a current lease whose deadline has passed at now to
// phaseLapsed (the watchdog's transition); false when it may still write.
func (s *leaseState) lapse(now time.Time) (severed, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.phase != phaseCurrent || s.mayWrite(now, s.gen) == "" {
		return severed{}, false
	}
	return s.enter(phaseLapsed, ""), true
}

// hold blocks writes while the worker's release or wait (why) is in
// flight: once the call commits nobody may write under the epoch, so
// nothing may slip out between the commit and the local drop.
func (s *leaseState) hold(why Reason) severed {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.phase == phaseEnding || s.phase == phaseGone {
		return severed{}
	}
	s.before, s.beforeWhy = s.phase, s.why
	return s.enter(phaseEnding, why)
}

// unhold undoes hold after the call failed: the lease returns where it
// was, current again (with a new generation) if its deadline is ahead.
func (s *leaseState) unhold(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.phase != phaseEnding {
		return
	}
	p, why := s.before, s.beforeWhy
	if p == phaseCurrent {
		p = s.settle("", now)
	}
	s.enter(p, why)
}

// end moves the lease to phaseGone for why.
func (s *leaseState) end(why Reason) severed {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.enter(phaseGone, why)
}

// view reports the lease's status at now ("current" or the reason it is
// not) and its remaining validity while current.
func (s *leaseState) view(now time.Time) (status string, remaining time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if why := s.mayWrite(now, s.gen); why != "" {
		return string(why), 0
	}
	return "current", s.deadline.Sub(now)
}

// currentDeadline returns the deadline while the lease is current.
func (s *leaseState) currentDeadline() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deadline, s.phase == phaseCurrent
}

// track registers a connection (or tunnel) carrying writes of generation
// gen; false (and c must be closed by the caller) when that generation is
// no longer the lease's current one.
func (s *leaseState) track(gen uint64, c io.Closer, tunnel bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.phase != phaseCurrent || gen != s.gen {
		return false
	}
	if s.conns == nil {
		s.conns = make(map[io.Closer]bool)
	}
	s.conns[c] = tunnel
	return true
}

// untrack forgets a closed connection.
func (s *leaseState) untrack(c io.Closer) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// writeClient returns the write client of generation gen, made by mk on
// first use; false when gen is no longer current.
func (s *leaseState) writeClient(gen uint64, mk func() *fasthttp.Client) (*fasthttp.Client, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.phase != phaseCurrent || gen != s.gen {
		return nil, false
	}
	if s.client == nil {
		s.client = mk()
	}
	return s.client, true
}
