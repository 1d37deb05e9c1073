package httpapi

import (
	"context"
	"sync"
	"time"
)

// beatWindow is how long the beats of one stream share a deadline
// context. A context with a timeout per beat was an allocation-heavy
// share of the leader's streamed-heartbeat CPU (the context, its done
// channel and its timer, on every beat); beats arriving within one window
// share one instead. The shared deadline counts from the window's first
// beat, so a beat's deadline is never later than arrival + the request
// timeout, and at most one window earlier: a beat can only give up
// sooner, never wait longer.
const beatWindow = 10 * time.Millisecond

// beatDeadlines hands out the deadline contexts of one stream's beats.
type beatDeadlines struct {
	parent  context.Context
	timeout time.Duration
	mu      sync.Mutex
	cur     *beatCtx
}

// beatCtx is one window's deadline context and the beats using it.
type beatCtx struct {
	context.Context
	cancel context.CancelFunc
	opened time.Time
	users  int
	// retired is set once a later window took over: the last beat out
	// cancels the context, so its timer does not outlive its beats.
	retired bool
}

// acquire returns the context for a beat that arrived at now; the caller
// passes it to release once the beat is answered.
func (d *beatDeadlines) acquire(now time.Time) *beatCtx {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.cur
	if c == nil || now.Sub(c.opened) >= beatWindow || now.Before(c.opened) {
		if c != nil {
			c.retired = true
			if c.users == 0 {
				c.cancel()
			}
		}
		ctx, cancel := context.WithDeadline(d.parent, now.Add(d.timeout))
		c = &beatCtx{Context: ctx, cancel: cancel, opened: now}
		d.cur = c
	}
	c.users++
	return c
}

// release ends one beat's use of c.
func (d *beatDeadlines) release(c *beatCtx) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c.users--
	if c.users == 0 && c.retired {
		c.cancel()
	}
}

// close cancels the current window's context; the stream is over.
func (d *beatDeadlines) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur != nil {
		d.cur.cancel()
		d.cur = nil
	}
}
