package lease

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestSeqCodeRoundTrips: a slot's value and the log's base give back the
// sequence number for every record a log can hold, across the modulus.
func TestSeqCodeRoundTrips(t *testing.T) {
	for _, base := range []uint64{0, 1, seqMod - 3, seqMod, seqMod + 1, 2*seqMod - 1, 1 << 40, 1<<64 - 1<<33} {
		for _, off := range []uint64{0, 1, 2, 3, 200_000, seqMod - 2} {
			seq := base + off
			v := seqCode(seq)
			require.NotZero(t, v)
			require.Equal(t, seq, seqOf(v, base), "base %d off %d", base, off)
		}
	}
}

// TestDedupIndexMatchesAMap drives a dedupLog through random adds and
// prunes (ids retried, records aging out in bursts, the table growing and
// shrinking) and checks after every step that each id is found exactly
// when a plain map of the live ids has it, pointing at its own record.
func TestDedupIndexMatchesAMap(t *testing.T) {
	for round := range 8 {
		seed := uint64(time.Now().UnixNano()) + uint64(round)
		rng := rand.New(rand.NewPCG(seed, 1))
		d := newDedupLog()
		ref := map[string]uint64{} // id -> seq
		now := Stamp(1)
		next := 0
		ids := func(k int) string { return fmt.Sprintf("rid-%d", k) }
		for step := range 3000 {
			switch r := rng.IntN(10); {
			case r < 7: // a new id, or a retry of a known one
				id := ids(next)
				if rng.IntN(4) == 0 && next > 0 {
					id = ids(rng.IntN(next))
				}
				if _, ok := ref[id]; ok {
					got, found := d.get(id)
					require.True(t, found, "seed %d step %d: %s", seed, step, id)
					require.Equal(t, id, got.id)
					continue
				}
				next++
				ref[id] = d.base + uint64(d.len())
				d.add(dedupRec{id: id, taskID: "t", at: now})
			case r < 9:
				now = now.Add(time.Duration(rng.IntN(int(DedupWindow / 50))))
			default: // age out a random share at once
				now = now.Add(DedupWindow / time.Duration(1+rng.IntN(4)))
			}
			d.prune(now, rng.IntN(5) == 0)
			for id, seq := range ref {
				if seq < d.base {
					delete(ref, id)
				}
			}
			require.Equal(t, len(ref), d.byID.n, "seed %d step %d", seed, step)
			require.Equal(t, len(ref), d.len(), "seed %d step %d", seed, step)
			require.LessOrEqual(t, 2*d.byID.n, len(d.byID.slots), "seed %d: at most half full", seed)
			require.True(t, len(d.byID.slots) <= minSlots || 8*d.byID.n >= len(d.byID.slots),
				"seed %d step %d: %d ids in %d slots, not given back", seed, step, d.byID.n, len(d.byID.slots))
			for c := range min(next, 24) {
				k := rng.IntN(next)
				if step%250 == 0 {
					k = c * next / 24 // now and then, a spread over all of them
				}
				id := ids(k)
				got, found := d.get(id)
				seq, want := ref[id]
				require.Equal(t, want, found, "seed %d step %d: %s", seed, step, id)
				if found {
					require.Equal(t, id, got.id, "seed %d step %d", seed, step)
					require.Equal(t, seq, d.base+uint64(uintptr(unsafe.Pointer(got))-uintptr(unsafe.Pointer(&d.recs[0])))/uint64(unsafe.Sizeof(dedupRec{})))
				}
			}
		}
	}
}

// TestDedupIndexCollidingHomes: ids whose probes overlap (a table of
// minSlots, filled to its limit and drained in arrival order) are found
// and forgotten like any others.
func TestDedupIndexCollidingHomes(t *testing.T) {
	d := newDedupLog()
	for k := range minSlots / 2 {
		d.add(dedupRec{id: fmt.Sprintf("c%d", k), at: Stamp(k + 1)})
	}
	require.Len(t, d.byID.slots, minSlots)
	for k := range minSlots / 2 {
		d.prune(Stamp(k+1).Add(DedupWindow), false)
		for j := range minSlots / 2 {
			_, found := d.get(fmt.Sprintf("c%d", j))
			require.Equal(t, j > k, found, "after %d pruned: c%d", k+1, j)
		}
	}
	require.Zero(t, d.byID.n)
}
