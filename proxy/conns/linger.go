package conns

import (
	"io"
	"net"
	"sync/atomic"
	"time"
)

// Lingering close: when the sidecar answers an error (431 for a 2 MiB
// header, 413, 400) while the worker is still sending, closing at once
// leaves unread bytes in the socket, and the kernel then resets the
// connection, which can destroy the error reply before the worker reads
// it. A connection marked to linger half-closes, reads and discards what
// is still coming for a bounded time and size, then closes.
const (
	lingerTime  = 2 * time.Second
	lingerBytes = 8 << 20
)

// LingerConn is a worker connection that can be marked to linger on
// close.
type LingerConn struct {
	net.Conn
	linger atomic.Bool
}

// setLinger marks the connection to linger when it is closed.
func (c *LingerConn) setLinger() { c.linger.Store(true) }

func (c *LingerConn) Close() error {
	if c.linger.Load() {
		if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		_ = c.Conn.SetReadDeadline(time.Now().Add(lingerTime))
		_, _ = io.CopyN(io.Discard, c.Conn, lingerBytes)
	}
	return c.Conn.Close()
}

// LingerListener hands out lingerConns.
type LingerListener struct{ net.Listener }

func (l LingerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &LingerConn{Conn: c}, nil
}

// MarkLinger makes the connection of a request that is answered with an
// error linger on close, when it can.
func MarkLinger(c net.Conn) {
	if l, ok := c.(interface{ setLinger() }); ok {
		l.setLinger()
	}
}
