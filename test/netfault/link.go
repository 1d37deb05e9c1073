package netfault

import (
	"errors"
	"fmt"
	"math/rand"
	"net"
	"sync"
	"time"
)

// LossEffect is what a lost chunk does to its connection (see SetLoss).
type LossEffect int

// Loss effects.
const (
	// LossReset resets the connection that lost a chunk.
	LossReset LossEffect = iota
	// LossStall keeps the connection open but delivers nothing more on it
	// in either direction, until the link is restored (which resets it).
	LossStall
)

// Options configures a Link. The zero value is usable.
type Options struct {
	// ListenAddr is where the link listens. Default "127.0.0.1:0".
	ListenAddr string
	// DialTimeout bounds connecting to the target. Default 2s.
	DialTimeout time.Duration
	// LossEffect is what a lost chunk does. Default LossReset.
	LossEffect LossEffect
	// Logf, when set, receives one line per fault event (for test logs).
	Logf func(format string, args ...any)
}

// Stats counts what a Link did. Bytes are counted when delivered.
type Stats struct {
	// Accepted is the number of connections accepted.
	Accepted int
	// Active is the number of connections currently relayed.
	Active int
	// Refused is the number of connections reset on accept during a Cut.
	Refused int
	// Reset is the number of live connections reset by Cut, loss or
	// Restore after a blackhole.
	Reset int
	// Blackholed is the number of connections that stopped delivering
	// (Blackhole, or a loss with LossStall).
	Blackholed int
	// LostChunks is the number of chunks SetLoss dropped.
	LostChunks int
	// BytesUp and BytesDown are bytes delivered to the target and to the
	// client.
	BytesUp, BytesDown int64
	// BytesSwallowed is the number of bytes accepted and never delivered.
	BytesSwallowed int64
	// BytesHeld is the number of bytes buffered now, awaiting Release.
	BytesHeld int64
}

type mode int

const (
	modePass mode = iota
	modeReset
	modeBlackhole
)

// Link is a TCP relay with controllable faults between a listener on
// loopback and a target address. All methods are safe for concurrent use.
type Link struct {
	target string
	opts   Options
	ln     net.Listener

	mu     sync.Mutex
	mode   mode
	held   bool
	delay  time.Duration
	loss   float64
	rng    *rand.Rand
	conns  map[*relay]struct{}
	stats  Stats
	closed bool

	wg sync.WaitGroup
}

// Listen starts a Link that relays connections to target.
func Listen(target string, opts Options) (*Link, error) {
	if opts.ListenAddr == "" {
		opts.ListenAddr = "127.0.0.1:0"
	}
	if opts.DialTimeout == 0 {
		opts.DialTimeout = 2 * time.Second
	}
	ln, err := net.Listen("tcp", opts.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("netfault: listen: %w", err)
	}
	l := &Link{target: target, opts: opts, ln: ln, conns: map[*relay]struct{}{}}
	l.wg.Add(1)
	go l.acceptLoop()
	return l, nil
}

// Addr is the link's listening address (host:port); point clients at it
// instead of the target.
func (l *Link) Addr() string { return l.ln.Addr().String() }

// Target is the address the link relays to.
func (l *Link) Target() string { return l.target }

// Cut resets every live connection and resets new ones as soon as they
// are accepted, until Restore.
func (l *Link) Cut() {
	l.mu.Lock()
	l.mode = modeReset
	victims := l.liveLocked()
	l.stats.Reset += len(victims)
	l.mu.Unlock()
	l.logf("cut: %d connections reset", len(victims))
	for _, r := range victims {
		r.abort(true)
	}
}

// Blackhole silently swallows everything from now on: live connections
// stay open but deliver nothing, new ones are accepted and never reach the
// target. Bytes waiting for delivery (delayed or held) are dropped too.
func (l *Link) Blackhole() {
	l.mu.Lock()
	l.mode = modeBlackhole
	n := 0
	for r := range l.conns {
		if !r.blackholed {
			r.blackholed = true
			n++
			r.dropQueuesLocked(l)
		}
	}
	l.stats.Blackholed += n
	l.mu.Unlock()
	l.logf("blackhole: %d connections silenced", n)
}

// Restore ends a Cut or a Blackhole: new connections are relayed again.
// Connections that were blackholed (by Blackhole or a stalling loss) are
// reset, since bytes they carried were lost. Hold, delay and loss are left
// as they are.
func (l *Link) Restore() {
	l.mu.Lock()
	l.mode = modePass
	var victims []*relay
	for r := range l.conns {
		if r.blackholed {
			victims = append(victims, r)
		}
	}
	l.stats.Reset += len(victims)
	l.mu.Unlock()
	l.logf("restore: %d blackholed connections reset", len(victims))
	for _, r := range victims {
		r.abort(true)
	}
}

// Hold buffers bytes in both directions of every connection, new ones
// included, without delivering them until Release.
func (l *Link) Hold() {
	l.mu.Lock()
	l.held = true
	l.mu.Unlock()
	l.logf("hold")
}

// Release delivers every held byte, in order, and stops holding.
func (l *Link) Release() {
	l.mu.Lock()
	l.held = false
	live := l.liveLocked()
	l.mu.Unlock()
	l.logf("release")
	for _, r := range live {
		r.up.poke()
		r.down.poke()
	}
}

// SetDelay delays the delivery of every chunk read from now on by d
// (0 turns delay off). Order within a connection is kept.
func (l *Link) SetDelay(d time.Duration) {
	l.mu.Lock()
	l.delay = d
	l.mu.Unlock()
	l.logf("delay %v", d)
}

// SetLoss loses each chunk read from now on with probability p (0 turns
// loss off), drawing from a source seeded with seed. What a loss does to
// its connection is Options.LossEffect.
func (l *Link) SetLoss(p float64, seed int64) {
	l.mu.Lock()
	l.loss = p
	l.rng = rand.New(rand.NewSource(seed))
	l.mu.Unlock()
	l.logf("loss p=%.2f seed=%d", p, seed)
}

// Stats returns a snapshot of the link's counters.
func (l *Link) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stats
	s.Active = len(l.conns)
	s.BytesHeld = 0
	for r := range l.conns {
		s.BytesHeld += r.up.queuedLocked() + r.down.queuedLocked()
	}
	return s
}

// Close stops accepting, closes every connection (held bytes are dropped)
// and waits for all of the link's goroutines to end. It is idempotent.
func (l *Link) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	live := l.liveLocked()
	l.mu.Unlock()
	err := l.ln.Close()
	for _, r := range live {
		r.abort(false)
	}
	l.wg.Wait()
	return err
}

func (l *Link) liveLocked() []*relay {
	out := make([]*relay, 0, len(l.conns))
	for r := range l.conns {
		out = append(out, r)
	}
	return out
}

func (l *Link) logf(format string, args ...any) {
	if l.opts.Logf != nil {
		l.opts.Logf("netfault %s→%s: "+format, append([]any{l.Addr(), l.target}, args...)...)
	}
}

func (l *Link) acceptLoop() {
	defer l.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			_ = c.Close()
			return
		}
		l.stats.Accepted++
		m := l.mode
		if m == modeReset {
			l.stats.Refused++
			l.mu.Unlock()
			resetConn(c)
			continue
		}
		r := newRelay(l, c)
		r.blackholed = m == modeBlackhole
		if r.blackholed {
			l.stats.Blackholed++
		}
		l.conns[r] = struct{}{}
		l.wg.Add(1)
		l.mu.Unlock()
		go r.run()
	}
}

// remove forgets r once all its goroutines are done.
func (l *Link) remove(r *relay) {
	l.mu.Lock()
	delete(l.conns, r)
	l.mu.Unlock()
}

// resetConn closes c with an RST instead of a FIN where it can.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
