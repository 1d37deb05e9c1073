package leases

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/proxy/proxytest"
)

// Each transition of a lease's state, and what mayWrite answers after it.
func TestLeaseStateTransitions(t *testing.T) {
	clk := proxytest.NewClock()
	now := clk.Now()
	st := newLeaseState(now.Add(10*time.Second), "", now)
	tk, why := st.check(now)
	require.Empty(t, why, "a fresh grant may write")

	// Suspect: blocked, and a request decided before is refused too.
	kind, _ := st.suspected(now)
	require.Equal(t, EventLost, kind)
	require.Equal(t, ReasonSuspect, tk.MayWrite(now))

	// A release in flight while suspect; it fails: back to suspect, not
	// to current.
	st.hold(ReasonReleased)
	require.Equal(t, ReasonReleased, tk.MayWrite(now))
	st.unhold(now)
	_, why = st.check(now)
	require.Equal(t, ReasonSuspect, why)

	// A renewal revives it under a new generation; the old ticket stays
	// refused, so nothing decided under the suspect one leaves.
	kind, _ = st.renewed(now.Add(10*time.Second), now)
	require.Equal(t, EventRevived, kind)
	tk2, why := st.check(now)
	require.Empty(t, why)
	require.NotEqual(t, tk.gen, tk2.gen)
	require.Equal(t, ReasonExpired, tk.MayWrite(now))

	// The watchdog lapses it at the deadline, not a nanosecond later.
	_, ok := st.lapse(now.Add(10*time.Second - time.Nanosecond))
	require.False(t, ok)
	_, ok = st.lapse(now.Add(10 * time.Second))
	require.True(t, ok)
	require.Equal(t, ReasonExpired, tk2.MayWrite(now), "lapsed: refused even at an earlier instant")

	// A renewal that comes too late does not revive it.
	kind, _ = st.renewed(now.Add(11*time.Second), now.Add(12*time.Second))
	require.Empty(t, kind)
	_, why = st.check(now.Add(12 * time.Second))
	require.Equal(t, ReasonExpired, why)

	// Gone is final: renewals and suspicion are ignored.
	st.end(ReasonRevoked)
	kind, _ = st.renewed(now.Add(time.Hour), now)
	require.Empty(t, kind)
	kind, _ = st.suspected(now)
	require.Empty(t, kind)
	_, why = st.check(now)
	require.Equal(t, ReasonRevoked, why)
}

// Leaving the current phase severs the generation's connections once;
// a connection of an ended generation cannot register.
func TestLeaseStateSeversConnectionsOnce(t *testing.T) {
	now := time.Now()
	st := newLeaseState(now.Add(time.Minute), "", now)
	tk, _ := st.check(now)
	c := &countCloser{}
	require.True(t, st.track(tk.gen, c, true))
	cut := st.hold(ReasonWaiting)
	require.Equal(t, 1, cut.close())
	require.Equal(t, 1, c.n)
	require.Zero(t, st.hold(ReasonWaiting), "already ending: nothing more to sever")
	require.False(t, st.track(tk.gen, &countCloser{}, false))
	st.unhold(now)
	tk2, _ := st.check(now)
	require.False(t, st.track(tk.gen, &countCloser{}, false), "an old generation never registers again")
	require.True(t, st.track(tk2.gen, &countCloser{}, false))
}

type countCloser struct{ n int }

func (c *countCloser) Close() error { c.n++; return nil }

// TestRenewalInTimeKeepsTheGeneration: a ticket refused at its deadline
// may write again when a renewal arrives before the watchdog lapses the
// lease, and an end refuses it for the end's reason.
func TestRenewalInTimeKeepsTheGeneration(t *testing.T) {
	clk := proxytest.NewClock()
	st := newLeaseState(clk.Now().Add(time.Second), "", clk.Now())
	tk, why := st.check(clk.Now())
	require.Empty(t, why)
	clk.Advance(time.Second)
	require.Equal(t, ReasonExpired, tk.MayWrite(clk.Now()), "not at or after the deadline")
	st.renewed(clk.Now().Add(time.Second), clk.Now())
	require.Empty(t, tk.MayWrite(clk.Now()))
	require.Equal(t, 0, st.end(ReasonRevoked).close())
	require.Equal(t, ReasonRevoked, tk.MayWrite(clk.Now()))
}
