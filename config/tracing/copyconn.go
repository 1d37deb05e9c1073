package tracing

import (
	"context"
	"io"
	"net"
	"sync"
)

// An export's body reaches a plain TCP connection through net/http's
// io.Copy into net.TCPConn.ReadFrom, which for a source it cannot splice
// copies through a new 32 KiB buffer: one per post, about 60 B of garbage
// per exported span at the default batch of 512, as much as the span's
// own allocations. A connection from pooledCopyDial copies through a
// buffer kept between posts instead. (Over TLS the transport wraps the
// connection in a *tls.Conn, which it must see as such for HTTP/2, so
// that path keeps net/http's own copy.)

// copyBufs holds the buffers of copyConn.ReadFrom.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// pooledCopyDial wraps dial so that its connections copy through a
// pooled buffer.
func pooledCopyDial(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cc := &copyConn{Conn: c}
		cc.w.Writer = c
		return cc, nil
	}
}

// copyConn is a connection whose ReadFrom copies through a pooled buffer.
type copyConn struct {
	net.Conn
	// w is the connection as a plain writer, made once: it hides the
	// connection's own ReadFrom, which would copy through a new buffer
	// again.
	w writerOnly
}

// ReadFrom copies r into the connection.
func (c *copyConn) ReadFrom(r io.Reader) (int64, error) {
	b := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(b)
	return io.CopyBuffer(&c.w, r, *b)
}

// writerOnly is a writer and nothing else.
type writerOnly struct{ io.Writer }
