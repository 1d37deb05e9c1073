package raftstore

import "time"

// Clock is the lessor's time source. Expiry decisions and the times the
// leader stamps into commands come from it, so unit tests can drive the
// lessor with a fake clock. Implementations must be safe for concurrent use.
type Clock interface {
	// Now returns the current time; the real clock's carries a monotonic
	// reading, so in-memory deadlines are immune to wall-clock steps.
	Now() time.Time
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
