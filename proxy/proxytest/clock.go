// Package proxytest holds test doubles shared by the sidecar's packages
// (a manual clock). Only tests import it.
package proxytest

import (
	"sort"
	"sync"
	"time"

	"github.com/fencepost/fencepost/proxy/clock"
)

// Clock is a manual clock (a clock.Clock). Its times carry the monotonic reading of
// the real time it started from, like time.Now.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	timers map[*timer]struct{}
}

type timer struct {
	c    *Clock
	when time.Time
	ch   chan time.Time
}

// NewClock returns a manual clock standing at the real time now.
func NewClock() *Clock {
	return &Clock{now: time.Now(), timers: make(map[*timer]struct{})}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer that fires when the clock has advanced by d.
func (c *Clock) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &timer{c: c, when: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
		return t
	}
	c.timers[t] = struct{}{}
	return t
}

func (t *timer) C() <-chan time.Time { return t.ch }

func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	_, ok := t.c.timers[t]
	delete(t.c.timers, t)
	return ok
}

// Advance moves the clock and fires every timer that became due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for t := range c.timers {
		if !t.when.After(c.now) {
			delete(c.timers, t)
			t.ch <- c.now
		}
	}
}

// Pending returns the deadlines of armed timers, earliest first.
func (c *Clock) Pending() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Duration
	for t := range c.timers {
		out = append(out, t.when.Sub(c.now))
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
