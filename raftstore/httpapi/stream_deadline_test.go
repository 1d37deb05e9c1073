package httpapi

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A beat's shared deadline is never later than its own arrival plus the
// timeout, and at most one window earlier.
func TestBeatDeadlineBounds(t *testing.T) {
	d := beatDeadlines{parent: context.Background(), timeout: time.Hour}
	defer d.close()
	base := time.Now()
	for _, off := range []time.Duration{0, 3 * time.Millisecond, beatWindow - 1, beatWindow, 25 * time.Millisecond, 26 * time.Millisecond} {
		arrival := base.Add(off)
		c := d.acquire(arrival)
		dl, ok := c.Deadline()
		require.True(t, ok)
		own := arrival.Add(time.Hour)
		require.False(t, dl.After(own), "beat at +%v: deadline %v is after its own %v", off, dl, own)
		require.Less(t, own.Sub(dl), beatWindow, "beat at +%v: deadline more than a window early", off)
		d.release(c)
	}
}

// Beats within a window share one context; a retired window's context is
// cancelled once its last beat is answered, not before; the stream's end
// cancels the current one.
func TestBeatDeadlineRetiresWithItsLastBeat(t *testing.T) {
	d := beatDeadlines{parent: context.Background(), timeout: time.Hour}
	base := time.Now()
	a := d.acquire(base)
	b := d.acquire(base.Add(time.Millisecond))
	require.Same(t, a, b, "beats within one window share a context")

	c := d.acquire(base.Add(beatWindow))
	require.NotSame(t, a, c, "a beat past the window opens a new one")
	require.NoError(t, a.Err(), "the old window still has two beats in flight")
	d.release(a)
	require.NoError(t, a.Err(), "one beat of the old window is still in flight")
	d.release(b)
	require.ErrorIs(t, a.Err(), context.Canceled, "the old window's last beat is answered")

	d.release(c)
	require.NoError(t, c.Err(), "the current window stays open for the next beat")
	d.close()
	require.ErrorIs(t, c.Err(), context.Canceled, "the stream's end cancels the current window")
}

// The stream's own context (its caller, its end) is the parent of every
// beat's.
func TestBeatDeadlineFollowsTheStream(t *testing.T) {
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKeyTest{}, "caller"))
	d := beatDeadlines{parent: parent, timeout: time.Hour}
	defer d.close()
	c := d.acquire(time.Now())
	require.Equal(t, "caller", c.Value(ctxKeyTest{}))
	cancel()
	require.ErrorIs(t, c.Err(), context.Canceled)
	d.release(c)
}

type ctxKeyTest struct{}
