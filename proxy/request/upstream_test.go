package request

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/proxy/leases"
)

func TestWriteConnRefusesBytesAfterDeadline(t *testing.T) {
	// Leases valid for 2s have a 200ms margin: the deadline is 1.8s on.
	tp := newTestPath(t, 2*time.Second)
	tp.acquire(t, "t")
	l, why := tp.k.Check("t")
	require.Empty(t, why)
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := &timedConn{Conn: a, t: l.Ticket, untrack: l.Ticket.Untrack, clock: tp.clk}
	go func() { _, _ = io.Copy(io.Discard, b) }()
	_, err := c.Write([]byte("POST / HTTP/1.1\r\n"))
	require.NoError(t, err)
	tp.clk.Advance(1800 * time.Millisecond)
	_, err = c.Write([]byte("more"))
	require.ErrorIs(t, err, errLeaseCut, "not one byte at or after the deadline")

	// A lease that ends refuses the connection's bytes for its reason.
	tp.k.Drop("t", 0, leases.ReasonRevoked, leases.EventRevoked, "test")
	_, err = c.Write([]byte("more"))
	require.ErrorIs(t, err, errLeaseCut)
	require.Equal(t, leases.ReasonRevoked, l.Ticket.MayWrite(tp.clk.Now()))
}
