package request

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/proxy/clock"
	"github.com/fencepost/fencepost/proxy/conns"
	"github.com/fencepost/fencepost/proxy/leases"
)

// errLeaseCut is returned when a write would dial on behalf of a lease
// generation that has already ended.
var errLeaseCut = errors.New("lease no longer current")

// upstream holds the pooled clients. Reads share one client; writes go
// through a client per lease generation whose connections are registered
// with the lease, so losing the lease closes exactly the connections
// carrying its writes, mid-request if need be.
type upstream struct {
	cfg     Settings
	origins originTable
	// interceptTLS verifies the upstreams of intercepted requests.
	interceptTLS *tls.Config
	shared       *fasthttp.Client
	// sharedConns tracks the shared client's connections so Shutdown can
	// close streams still running after the drain.
	sharedConns conns.Set
}

func newUpstream(cfg Settings) (*upstream, error) {
	o, err := newOriginTable(cfg.TLSOriginate)
	if err != nil {
		return nil, err
	}
	it, err := newInterceptTLS(cfg.UpstreamCAFile)
	if err != nil {
		return nil, err
	}
	u := &upstream{cfg: cfg, origins: o, interceptTLS: it}
	u.shared = u.newClient(leases.Ticket{})
	return u, nil
}

// responseHeaderBytes bounds an upstream response's header block.
const responseHeaderBytes = 64 << 10

// newClient builds a client whose connections are tied to t (the zero
// ticket: the shared read client).
func (u *upstream) newClient(t leases.Ticket) *fasthttp.Client {
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
		// The one exception: a pooled connection found closed before the
		// first byte was written (errStaleConn) is retried once on a new
		// connection; the write client's dialer and connections check the
		// lease again for it.
		MaxIdemponentCallAttempts: 2,
		RetryIfErr:                retryStale,
		MaxResponseBodySize:       maxBody,
		ReadBufferSize:            responseHeaderBytes,
		MaxIdleConnDuration:       u.cfg.UpstreamIdleTimeout,
		Dial:                      u.dialer(t),
		ConfigureClient: func(hc *fasthttp.HostClient) error {
			if hc.IsTLS {
				hc.TLSConfig = u.origins.forAddr(hc.Addr)
				if hc.TLSConfig == nil {
					hc.TLSConfig = u.interceptTLS
				}
			}
			return nil
		},
	}
}

// client returns the client for a request: the shared one for reads, the
// write client of the lease generation t for writes (errLeaseCut when
// that generation has ended).
func (u *upstream) client(write bool, t leases.Ticket) (*fasthttp.Client, error) {
	if !write {
		return u.shared, nil
	}
	c, ok := t.WriteClient(func() *fasthttp.Client { return u.newClient(t) })
	if !ok {
		return nil, errLeaseCut
	}
	return c, nil
}

// close closes every connection of the shared client, in use or idle.
func (u *upstream) close() {
	u.sharedConns.CloseAll()
	u.shared.CloseIdleConnections()
}

// dialer connects with DialTimeout and wraps the connection so that every
// read and write has a deadline of UpstreamTimeout from its start: a hung
// upstream fails, a slow stream that keeps sending does not. A write
// connection asks its lease before the dial and before every write.
func (u *upstream) dialer(t leases.Ticket) fasthttp.DialFunc {
	return func(addr string) (net.Conn, error) {
		write := !t.IsZero()
		if write && t.MayWrite(u.cfg.Clock.Now()) != "" {
			return nil, errLeaseCut
		}
		c, err := net.DialTimeout("tcp", conns.DialTarget(addr), u.cfg.DialTimeout)
		if err != nil {
			return nil, err
		}
		tc := &timedConn{Conn: c, timeout: u.cfg.UpstreamTimeout, t: t, clock: u.cfg.Clock}
		if write {
			tc.untrack = t.Untrack
			if !t.Track(tc, false) {
				_ = c.Close()
				return nil, errLeaseCut
			}
		} else {
			tc.untrack = u.sharedConns.Untrack
			if !u.sharedConns.Track(tc) {
				_ = c.Close()
				return nil, errLeaseCut
			}
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
	timeout time.Duration
	t       leases.Ticket   // a write connection's lease generation; zero for reads
	untrack func(io.Closer) // forgets the connection in its lease's or the shared set
	clock   clock.Clock
	readDL  time.Time // the read deadline last set; only Read uses it
	writeDL time.Time // the write deadline last set; only Write uses it
	// lastRead is when a read last returned; a write after a pause from
	// then first checks that the server has not closed the connection.
	lastRead time.Time
	once     sync.Once
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
	n, err := c.Conn.Read(p)
	c.lastRead = time.Now()
	return n, err
}

func (c *timedConn) Write(p []byte) (int, error) {
	// Not one byte of a write leaves once its lease may not write.
	if !c.t.IsZero() && c.t.MayWrite(c.clock.Now()) != "" {
		return 0, errLeaseCut
	}
	if !c.lastRead.IsZero() && time.Since(c.lastRead) >= livenessAfter {
		// A reused connection after a pause: the server may have closed
		// it meanwhile. Nothing of this request is written yet.
		c.lastRead = time.Time{}
		if closedByPeer(c.Conn) {
			return 0, errStaleConn
		}
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
		c.untrack(c)
		err = c.Conn.Close()
	})
	return err
}
