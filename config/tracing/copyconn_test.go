package tracing

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// countConn is a connection that keeps what is written to it.
type countConn struct {
	net.Conn
	got bytes.Buffer
}

func (c *countConn) Write(p []byte) (int, error) { return c.got.Write(p) }

// A copyConn copies a body whole, as net/http hands it over (a
// LimitedReader over the body), through a kept buffer: no allocation per
// post once warm.
func TestCopyConnCopiesWithoutANewBuffer(t *testing.T) {
	body := strings.Repeat("span-bytes:", 20_000) // several buffers' worth
	cc := &countConn{}
	c := &copyConn{Conn: cc}
	c.w.Writer = cc
	n, err := c.ReadFrom(io.LimitReader(strings.NewReader(body), int64(len(body))))
	require.NoError(t, err)
	require.Equal(t, int64(len(body)), n)
	require.Equal(t, body, cc.got.String())

	src := strings.NewReader(body)
	lr := &io.LimitedReader{}
	allocs := testing.AllocsPerRun(20, func() {
		cc.got.Reset()
		src.Reset(body)
		*lr = io.LimitedReader{R: src, N: int64(len(body))}
		if _, err := c.ReadFrom(lr); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs, "a 32 KiB buffer per copy is what copyConn exists to avoid")
}

// A connection dialled through pooledCopyDial is a copyConn over the
// dialled one; a failed dial stays an error.
func TestPooledCopyDialWraps(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	d := pooledCopyDial((&net.Dialer{}).DialContext)
	c, err := d(t.Context(), "tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_, ok := c.(io.ReaderFrom)
	require.True(t, ok)
	_, ok = c.(*copyConn)
	require.True(t, ok)
	ln.Close()
	_, err = d(t.Context(), "tcp", ln.Addr().String())
	require.Error(t, err)
}
