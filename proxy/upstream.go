package proxy

import (
	"errors"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// errLeaseCut is returned when a write would dial on behalf of a lease
// generation that has already ended.
var errLeaseCut = errors.New("lease no longer current")

// upstream holds the pooled clients. Reads share one client; writes go
// through a client per lease generation whose connections are registered
// with the generation, so losing the lease closes exactly the connections
// carrying that lease's writes, mid-request if need be.
type upstream struct {
	cfg     Config
	origins originTable
	shared  *fasthttp.Client
	// sharedGen tracks the shared client's connections so Shutdown can
	// close streams still running after the drain.
	sharedGen *generation
}

func newUpstream(cfg Config) (*upstream, error) {
	o, err := newOriginTable(cfg.TLSOriginate)
	if err != nil {
		return nil, err
	}
	u := &upstream{cfg: cfg, origins: o, sharedGen: newGeneration()}
	u.shared = u.newClient(u.sharedGen)
	return u, nil
}

// responseHeaderBytes bounds an upstream response's header block.
const responseHeaderBytes = 64 << 10

func (u *upstream) newClient(g *generation) *fasthttp.Client {
	maxBody := 0
	if u.cfg.MaxResponseBody <= int64(^uint(0)>>1) {
		maxBody = int(u.cfg.MaxResponseBody)
	}
	return &fasthttp.Client{
		NoDefaultUserAgentHeader:      true,
		DisableHeaderNamesNormalizing: true,
		DisablePathNormalizing:        true,
		StreamResponseBody:            true,
		// No automatic retries, of writes or anything else: a retry is
		// the worker's decision, with the same Idempotency-Key.
		MaxIdemponentCallAttempts: 1,
		RetryIfErr:                func(*fasthttp.Request, int, error) (bool, bool) { return false, false },
		MaxResponseBodySize:       maxBody,
		ReadBufferSize:            responseHeaderBytes,
		MaxIdleConnDuration:       u.cfg.IdleTimeout,
		Dial:                      u.dialer(g),
		ConfigureClient: func(hc *fasthttp.HostClient) error {
			if hc.IsTLS {
				hc.TLSConfig = u.origins.forAddr(hc.Addr)
			}
			return nil
		},
	}
}

// writeClient returns the client for writes under generation g.
func (u *upstream) writeClient(g *generation) *fasthttp.Client {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.client == nil {
		g.client = u.newClient(g)
	}
	return g.client
}

// close closes every connection of the shared client, in use or idle.
func (u *upstream) close() {
	u.sharedGen.cutAll()
	u.shared.CloseIdleConnections()
}

// dialer connects with DialTimeout and wraps the connection so that every
// read and write has a deadline of UpstreamTimeout from its start: a hung
// upstream fails, a slow stream that keeps sending does not.
func (u *upstream) dialer(g *generation) fasthttp.DialFunc {
	return func(addr string) (net.Conn, error) {
		checkWrites := g != nil && g != u.sharedGen
		if g != nil && (g.isCut() || checkWrites && !g.open(u.cfg.Clock.Now())) {
			return nil, errLeaseCut
		}
		c, err := net.DialTimeout("tcp", dialTarget(addr), u.cfg.DialTimeout)
		if err != nil {
			return nil, err
		}
		tc := &timedConn{Conn: c, timeout: u.cfg.UpstreamTimeout, gen: g, clock: u.cfg.Clock, checkWrites: checkWrites}
		if g != nil && !g.track(tc, false) {
			_ = c.Close()
			return nil, errLeaseCut
		}
		return tc, nil
	}
}

// timedConn is an upstream connection with per-operation deadlines.
//
// Setting a deadline re-arms a runtime timer, which showed in the proxy
// path's profile at two per request. A deadline is therefore moved only
// when it would otherwise leave less than timeout-timeout/deadlineSlack
// for the operation that starts now: every read and write still gets at
// least 63/64 of UpstreamTimeout without progress before it fails, and a
// busy connection re-arms its timers about once per timeout/64.
type timedConn struct {
	net.Conn
	timeout     time.Duration
	gen         *generation
	clock       Clock
	checkWrites bool      // a write connection: every socket write needs the lease open
	readDL      time.Time // the read deadline last set; only Read uses it
	writeDL     time.Time // the write deadline last set; only Write uses it
	once        sync.Once
}

// deadlineSlack is the fraction (1/deadlineSlack) of UpstreamTimeout by
// which an operation's deadline may fall short of a full timeout.
const deadlineSlack = 64

// nextDeadline returns the deadline to set for an operation starting
// now, or false when last still leaves it enough time.
func (c *timedConn) nextDeadline(last time.Time) (time.Time, bool) {
	now := time.Now()
	if !last.IsZero() && !now.Add(c.timeout-c.timeout/deadlineSlack).After(last) {
		return last, false
	}
	return now.Add(c.timeout), true
}

func (c *timedConn) Read(p []byte) (int, error) {
	if c.timeout > 0 {
		if d, ok := c.nextDeadline(c.readDL); ok {
			c.readDL = d
			_ = c.Conn.SetReadDeadline(d)
		}
	}
	return c.Conn.Read(p)
}

func (c *timedConn) Write(p []byte) (int, error) {
	if c.checkWrites && !c.gen.open(c.clock.Now()) {
		return 0, errLeaseCut
	}
	if c.timeout > 0 {
		if d, ok := c.nextDeadline(c.writeDL); ok {
			c.writeDL = d
			_ = c.Conn.SetWriteDeadline(d)
		}
	}
	return c.Conn.Write(p)
}

func (c *timedConn) Close() error {
	var err error
	c.once.Do(func() {
		if c.gen != nil {
			c.gen.untrack(c)
		}
		err = c.Conn.Close()
	})
	return err
}
