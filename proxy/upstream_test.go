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
	g := newGeneration()
	g.setDeadline(clk.Now().Add(time.Second))
	c := &timedConn{Conn: a, gen: g, clock: clk, checkWrites: true}
	go func() { _, _ = io.Copy(io.Discard, b) }()
	_, err := c.Write([]byte("POST / HTTP/1.1\r\n"))
	require.NoError(t, err)
	clk.Advance(time.Second)
	_, err = c.Write([]byte("more"))
	require.ErrorIs(t, err, errLeaseCut, "not one byte at or after the deadline")

	// A renewal moves the generation's deadline with the lease.
	g.setDeadline(clk.Now().Add(time.Second))
	require.True(t, g.open(clk.Now()))
	require.Equal(t, 0, g.cutAll())
	require.False(t, g.open(clk.Now()))
}

func TestRenewMovesGenerationDeadline(t *testing.T) {
	clk := newFakeClock()
	lt := newLeaseTable(0.01, 200*time.Millisecond)
	t0 := clk.Now()
	snap := lt.grant(testGrant("t", 5, 2*time.Second, time.Second), t0, t0)
	require.False(t, snap.gen.open(t0.Add(1800*time.Millisecond)))
	lt.renew(leaseState("t", 5, 2000), t0.Add(time.Second), t0.Add(time.Second))
	require.True(t, snap.gen.open(t0.Add(2700*time.Millisecond)))
	require.False(t, snap.gen.open(t0.Add(2800*time.Millisecond)))
}
