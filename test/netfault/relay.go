package netfault

import (
	"net"
	"sync"
	"time"
)

// chunk is one read's worth of bytes and the earliest time it may be
// delivered.
type chunk struct {
	data []byte
	due  time.Time
}

// pipe is one direction of a relay: a reader goroutine queues chunks read
// from src, a writer goroutine delivers them to dst when the link allows.
type pipe struct {
	r      *relay
	up     bool
	q      []chunk // guarded by Link.mu
	eof    bool    // guarded by Link.mu
	notify chan struct{}
}

// relay is one relayed connection.
type relay struct {
	l          *Link
	client     net.Conn
	blackholed bool // guarded by Link.mu
	up, down   *pipe
	done       chan struct{}
	once       sync.Once

	mu     sync.Mutex // guards server and aborted
	server net.Conn
	abortd bool
}

func newRelay(l *Link, c net.Conn) *relay {
	r := &relay{l: l, client: c, done: make(chan struct{})}
	r.up = &pipe{r: r, up: true, notify: make(chan struct{}, 1)}
	r.down = &pipe{r: r, notify: make(chan struct{}, 1)}
	return r
}

func (p *pipe) poke() {
	select {
	case p.notify <- struct{}{}:
	default:
	}
}

func (p *pipe) queuedLocked() int64 {
	var n int64
	for _, c := range p.q {
		n += int64(len(c.data))
	}
	return n
}

// dropQueuesLocked discards everything not yet delivered.
func (r *relay) dropQueuesLocked(l *Link) {
	l.stats.BytesSwallowed += r.up.queuedLocked() + r.down.queuedLocked()
	r.up.q, r.down.q = nil, nil
}

// abort ends the relay at once: both sockets are closed, with an RST when
// rst is set. Safe to call more than once and from any goroutine.
func (r *relay) abort(rst bool) {
	r.once.Do(func() {
		close(r.done)
		r.mu.Lock()
		r.abortd = true
		s := r.server
		r.mu.Unlock()
		for _, c := range []net.Conn{r.client, s} {
			if c == nil {
				continue
			}
			if rst {
				resetConn(c)
			} else {
				_ = c.Close()
			}
		}
	})
}

// run relays the connection until both directions are done or the relay
// is aborted.
func (r *relay) run() {
	l := r.l
	defer l.wg.Done()
	defer l.remove(r)
	defer r.abort(false)

	l.mu.Lock()
	bh := r.blackholed
	l.mu.Unlock()
	if bh {
		// Accepted during a blackhole: never reaches the target.
		r.swallow(r.client)
		return
	}
	s, err := net.DialTimeout("tcp", l.target, l.opts.DialTimeout)
	if err != nil {
		l.logf("dial %s: %v", l.target, err)
		r.abort(true)
		return
	}
	r.mu.Lock()
	if r.abortd {
		r.mu.Unlock()
		resetConn(s)
		return
	}
	r.server = s
	r.mu.Unlock()

	var wg sync.WaitGroup
	wg.Add(4)
	go func() { defer wg.Done(); r.read(r.client, r.up) }()
	go func() { defer wg.Done(); r.write(s, r.up) }()
	go func() { defer wg.Done(); r.read(s, r.down) }()
	go func() { defer wg.Done(); r.write(r.client, r.down) }()
	wg.Wait()
}

// swallow reads and discards c until it fails.
func (r *relay) swallow(c net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		r.l.mu.Lock()
		r.l.stats.BytesSwallowed += int64(n)
		r.l.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// read queues what src sends, applying blackhole and loss at read time.
func (r *relay) read(src net.Conn, p *pipe) {
	l := r.l
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			l.mu.Lock()
			switch {
			case r.blackholed:
				l.stats.BytesSwallowed += int64(n)
			case l.loss > 0 && l.rng.Float64() < l.loss:
				l.stats.LostChunks++
				if l.opts.LossEffect == LossStall {
					r.blackholed = true
					l.stats.Blackholed++
					l.stats.BytesSwallowed += int64(n)
					r.dropQueuesLocked(l)
					l.mu.Unlock()
					l.logf("loss: connection stalled")
					continue
				}
				l.stats.Reset++
				l.mu.Unlock()
				l.logf("loss: connection reset")
				r.abort(true)
				return
			default:
				data := make([]byte, n)
				copy(data, buf[:n])
				p.q = append(p.q, chunk{data: data, due: time.Now().Add(l.delay)})
			}
			l.mu.Unlock()
			p.poke()
		}
		if err != nil {
			l.mu.Lock()
			p.eof = true
			bh := r.blackholed
			l.mu.Unlock()
			if bh {
				// Nothing will ever be delivered on this connection again.
				r.abort(false)
				return
			}
			p.poke()
			return
		}
	}
}

// write delivers p's chunks to dst in order, when they are due and the
// link is not holding, and half-closes dst after the last one.
func (r *relay) write(dst net.Conn, p *pipe) {
	l := r.l
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		var wake <-chan time.Time
		l.mu.Lock()
		switch {
		case r.blackholed || l.held:
			// Wait for Release, Restore (which aborts) or the end.
		case len(p.q) > 0:
			c := p.q[0]
			if d := time.Until(c.due); d > 0 {
				if timer == nil {
					timer = time.NewTimer(d)
				} else {
					timer.Reset(d)
				}
				wake = timer.C
				break
			}
			p.q[0] = chunk{}
			p.q = p.q[1:]
			l.mu.Unlock()
			if _, err := dst.Write(c.data); err != nil {
				r.abort(true)
				return
			}
			l.mu.Lock()
			if p.up {
				l.stats.BytesUp += int64(len(c.data))
			} else {
				l.stats.BytesDown += int64(len(c.data))
			}
			l.mu.Unlock()
			continue
		case p.eof:
			l.mu.Unlock()
			if cw, ok := dst.(interface{ CloseWrite() error }); ok {
				_ = cw.CloseWrite()
			}
			return
		}
		l.mu.Unlock()
		select {
		case <-p.notify:
		case <-wake:
		case <-r.done:
			return
		}
		if wake != nil {
			timer.Stop() // since Go 1.23 no stale tick can remain
		}
	}
}
