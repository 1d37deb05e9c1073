package cluster

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"go.uber.org/zap"
)

// Heartbeat transports (Config.HeartbeatTransport). On the stream, every
// heartbeat attempt to a member is one beat on one long-lived connection
// to it (fence/api/hbstream.go) instead of an HTTP request; hedge.go's
// rules are the same for both, attempt by attempt.
const (
	// TransportStream: beats on a heartbeat stream per member, unary
	// requests to a member that lacks the stream route.
	TransportStream = "stream"
	// TransportUnary: one POST per heartbeat attempt.
	TransportUnary = "unary"
	// DefaultHeartbeatTransport is the transport of a zero Config.
	DefaultHeartbeatTransport = TransportStream
)

// unaryFor is how long a member that answered the upgrade with 400, 404
// or 405 (an older version, in a rolling upgrade) is sent unary heartbeats
// before the stream is tried again, so it gets streams once upgraded.
const unaryFor = time.Minute

// streamBufSize is a stream connection's read and write buffer.
const streamBufSize = 16 << 10

// errStreamClosed is why Close broke the streams.
var errStreamClosed = errors.New("client closed")

// memberStream is the heartbeat stream to one member, and what the client
// knows about that member's support for it.
type memberStream struct {
	mu sync.Mutex
	sc *streamConn // nil when none is open
	// dialing is closed when a dial under way ends.
	dialing chan struct{}
	// unaryUntil: the member lacks the route; unary until then.
	unaryUntil time.Time
}

// streamConn is one open heartbeat stream.
type streamConn struct {
	conn net.Conn
	wmu  sync.Mutex // serializes frames
	bw   *bufio.Writer
	br   *bufio.Reader

	mu      sync.Mutex
	pending map[uint64]chan api.Reply
	nextID  uint64
	err     error         // why the stream broke
	done    chan struct{} // closed when it broke
}

// streamFor returns the open stream to member idx, dialling one if there
// is none; unary reports that the member is to be sent unary heartbeats.
// When it returns no stream and not unary, res is the failed attempt.
func (c *Client) streamFor(ctx context.Context, idx int, deadline time.Time) (sc *streamConn, unary bool, res attemptResult) {
	ms := c.streams[idx]
	ms.mu.Lock()
	for {
		if time.Now().Before(ms.unaryUntil) {
			ms.mu.Unlock()
			return nil, true, res
		}
		if ms.sc != nil {
			sc = ms.sc
			ms.mu.Unlock()
			return sc, false, res
		}
		if ms.dialing == nil {
			break
		}
		// One dial per member at a time; the others wait for it.
		ch := ms.dialing
		ms.mu.Unlock()
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-ch:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			return nil, false, attemptResult{err: fmt.Errorf("%w: %s: heartbeat stream not open: %w", ErrUnavailable, c.endpoints[idx], ctx.Err()), retry: true, dialFailed: true}
		case <-t.C:
			return nil, false, attemptResult{err: fmt.Errorf("%w: %s: heartbeat stream not open in time", ErrUnavailable, c.endpoints[idx]), retry: true, dialFailed: true}
		}
		ms.mu.Lock()
	}
	ch := make(chan struct{})
	ms.dialing = ch
	ms.mu.Unlock()
	sc, unary, res = c.dialStream(idx, deadline)
	ms.mu.Lock()
	ms.dialing = nil
	close(ch)
	if sc != nil {
		ms.sc = sc
	}
	if unary {
		ms.unaryUntil = time.Now().Add(unaryFor)
		if ce := c.log.Check(zap.InfoLevel, "member has no heartbeat stream; heartbeating it unary"); ce != nil {
			ce.Write(zap.String("member", c.endpoints[idx]), zap.Duration("for", unaryFor))
		}
	}
	ms.mu.Unlock()
	return sc, unary, res
}

// dialStream connects to member idx and upgrades the connection, all by
// deadline.
func (c *Client) dialStream(idx int, deadline time.Time) (*streamConn, bool, attemptResult) {
	base := c.endpoints[idx]
	hostport := base[strings.Index(base, "://")+3:]
	fail := func(err error) attemptResult {
		return attemptResult{err: fmt.Errorf("%w: %s: heartbeat stream: %v", ErrUnavailable, base, err), dialFailed: true, retry: true}
	}
	wait := time.Until(deadline)
	if wait <= 0 {
		return nil, false, fail(context.DeadlineExceeded)
	}
	d := net.Dialer{Timeout: min(wait, c.cfg.DialTimeout)}
	conn, err := d.Dial("tcp", hostport)
	if err != nil {
		return nil, false, fail(err)
	}
	_ = conn.SetDeadline(deadline)
	if c.cfg.TLS != nil {
		tc := c.cfg.TLS
		if tc.ServerName == "" {
			tc = tc.Clone()
			tc.ServerName, _, _ = net.SplitHostPort(hostport)
		}
		t := tls.Client(conn, tc)
		if err := t.Handshake(); err != nil {
			_ = conn.Close()
			return nil, false, fail(err)
		}
		conn = t
	}
	// Written by hand: the upgrade is the one request of the connection.
	if _, err := io.WriteString(conn, "POST "+api.PathHeartbeatStream+" HTTP/1.1\r\nHost: "+hostport+
		"\r\nUser-Agent: fencepost-cluster-client\r\nConnection: Upgrade\r\nUpgrade: "+api.HeartbeatStreamProtocol+
		"\r\nContent-Length: 0\r\n\r\n"); err != nil {
		_ = conn.Close()
		return nil, false, fail(err)
	}
	br := bufio.NewReaderSize(conn, streamBufSize)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		_ = conn.Close()
		return nil, false, fail(err)
	}
	if resp.StatusCode == http.StatusSwitchingProtocols &&
		strings.EqualFold(resp.Header.Get("Upgrade"), api.HeartbeatStreamProtocol) {
		_ = conn.SetDeadline(time.Time{})
		sc := &streamConn{conn: conn, br: br, bw: bufio.NewWriterSize(conn, streamBufSize),
			pending: map[uint64]chan api.Reply{}, done: make(chan struct{})}
		c.streamWG.Add(1)
		go c.readStream(idx, sc)
		return sc, false, attemptResult{}
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = conn.Close()
	switch resp.StatusCode {
	case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusBadRequest:
		// A member without the route (an older version).
		return nil, true, attemptResult{}
	}
	e := &Error{Status: resp.StatusCode, Endpoint: base,
		Problem: decodeProblemParts(resp.StatusCode, []byte(resp.Header.Get("Content-Type")), body)}
	var leader string
	if v := resp.Header.Get(headerLeader); v != "" {
		leader, _ = normalizeEndpoint(v, c.cfg.TLS != nil)
	}
	return nil, false, attemptResult{err: e, retry: e.retryable(), leader: leader}
}

// readStream delivers replies to their beats until the stream breaks.
func (c *Client) readStream(idx int, sc *streamConn) {
	defer c.streamWG.Done()
	var hdr [api.StreamFrameHeader]byte
	var err error
	for {
		if _, err = io.ReadFull(sc.br, hdr[:]); err != nil {
			break
		}
		var n int
		if n, err = api.FrameLen(hdr[:]); err != nil {
			break
		}
		payload := make([]byte, n) // handed to the beat's waiter
		if _, err = io.ReadFull(sc.br, payload); err != nil {
			break
		}
		var rep api.Reply
		if rep, err = api.ParseReply(payload); err != nil {
			break
		}
		if rep.ID == 0 {
			p := decodeProblemParts(rep.Status, []byte(api.ProblemContentType), rep.Body)
			err = fmt.Errorf("the member closed the stream: %s", p.Detail)
			break
		}
		sc.mu.Lock()
		ch, ok := sc.pending[rep.ID]
		delete(sc.pending, rep.ID)
		sc.mu.Unlock()
		if ok {
			ch <- rep // buffered; a beat given up on has no waiter
		}
	}
	c.breakStream(idx, sc, err)
}

// breakStream closes sc, failing every beat waiting on it, and forgets it
// so the next heartbeat to the member dials a new one.
func (c *Client) breakStream(idx int, sc *streamConn, err error) {
	sc.mu.Lock()
	if sc.err == nil {
		sc.err = err
		close(sc.done)
		_ = sc.conn.Close()
	}
	sc.mu.Unlock()
	ms := c.streams[idx]
	ms.mu.Lock()
	if ms.sc == sc {
		ms.sc = nil
	}
	ms.mu.Unlock()
}

// closeStreams breaks every open stream and waits for their readers.
func (c *Client) closeStreams() {
	for idx, ms := range c.streams {
		ms.mu.Lock()
		sc := ms.sc
		ms.mu.Unlock()
		if sc != nil {
			c.breakStream(idx, sc, errStreamClosed)
		}
	}
	c.streamWG.Wait()
}
