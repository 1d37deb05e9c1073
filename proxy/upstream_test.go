package proxy

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestWriteConnRefusesBytesAfterDeadline(t *testing.T) {
	clk := newFakeClock()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	st := newLeaseState(clk.Now().Add(time.Second), "", clk.Now())
	tk, why := st.check(clk.Now())
	require.Empty(t, why)
	c := &timedConn{Conn: a, t: tk, untrack: st.untrack, clock: clk}
	go func() { _, _ = io.Copy(io.Discard, b) }()
	_, err := c.Write([]byte("POST / HTTP/1.1\r\n"))
	require.NoError(t, err)
	clk.Advance(time.Second)
	_, err = c.Write([]byte("more"))
	require.ErrorIs(t, err, errLeaseCut, "not one byte at or after the deadline")

	// A renewal in time (the watchdog has not lapsed it) keeps the
	// generation: the connection may write again.
	st.renewed(clk.Now().Add(time.Second), clk.Now())
	require.Empty(t, tk.MayWrite(clk.Now()))
	require.Equal(t, 0, st.end(ReasonRevoked).close())
	require.Equal(t, ReasonRevoked, tk.MayWrite(clk.Now()))
}

func TestRenewMovesTheDeadline(t *testing.T) {
	clk := newFakeClock()
	lt := newLeaseTable(0.01, 200*time.Millisecond)
	t0 := clk.Now()
	ref, _ := lt.grant(testGrant("t", 5, 2*time.Second, time.Second), t0, t0)
	require.Equal(t, ReasonExpired, ref.Ticket.MayWrite(t0.Add(1800*time.Millisecond)))
	lt.renew(renewal("t", 5, 2000), t0.Add(time.Second), t0.Add(time.Second))
	require.Empty(t, ref.Ticket.MayWrite(t0.Add(2700*time.Millisecond)))
	require.Equal(t, ReasonExpired, ref.Ticket.MayWrite(t0.Add(2800*time.Millisecond)))
}
