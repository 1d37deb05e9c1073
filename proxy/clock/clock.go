// Package clock is the sidecar's time source: the Clock interface every
// deadline is computed and compared with, and the real clock. It imports
// nothing of the sidecar; tests substitute a manual clock.
package clock

import "time"

// Clock is the time source of the sidecar. Deadlines are computed from
// Now and compared with Now, so an implementation must return times that
// carry Go's monotonic reading (time.Now does): wall-clock steps must not
// move a lease deadline. Tests inject a fake.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that fires once after d.
	NewTimer(d time.Duration) Timer
}

// Timer is the subset of *time.Timer the sidecar uses.
type Timer interface {
	// C returns the channel the timer fires on.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
}

// System is the real clock: time.Now and time.NewTimer.
type System struct{}

// Now returns time.Now(), which carries the monotonic reading.
func (System) Now() time.Time { return time.Now() }

// NewTimer wraps time.NewTimer.
func (System) NewTimer(d time.Duration) Timer { return sysTimer{time.NewTimer(d)} }

type sysTimer struct{ t *time.Timer }

func (s sysTimer) C() <-chan time.Time { return s.t.C }
func (s sysTimer) Stop() bool          { return s.t.Stop() }
