package lease

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStampWritesWhatTimeWrites: snapshots and API replies keep their
// bytes, so a Stamp must encode every moment exactly as time.Time's
// MarshalJSON does for the same moment in UTC, and read it back.
func TestStampWritesWhatTimeWrites(t *testing.T) {
	seed := time.Now().UnixNano()
	r := rand.New(rand.NewPCG(uint64(seed), 7))
	moments := []time.Time{
		time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 120_000_000, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 1, time.UTC),
		time.Date(1700, 6, 1, 0, 0, 0, 999, time.UTC),
		time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Unix(-1, 0).UTC(),
	}
	for range 500 {
		moments = append(moments, time.Unix(0, r.Int64N(math.MaxInt64)-r.Int64N(math.MaxInt64)).UTC())
	}
	for _, m := range moments {
		want, err := json.Marshal(m)
		require.NoError(t, err)
		got, err := json.Marshal(StampOf(m))
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "seed %d", seed)
		var back Stamp
		require.NoError(t, json.Unmarshal(got, &back))
		require.Equal(t, StampOf(m), back)
		require.True(t, m.Equal(back.Time()), "%v read back as %v", m, back.Time())
	}
}

func TestStampZeroIsTheZeroTime(t *testing.T) {
	require.Equal(t, Stamp(0), StampOf(time.Time{}))
	require.True(t, Stamp(0).Time().IsZero())
	want, _ := json.Marshal(time.Time{})
	got, _ := json.Marshal(Stamp(0))
	require.Equal(t, string(want), string(got))
	var s Stamp
	require.NoError(t, json.Unmarshal(want, &s))
	require.True(t, s.IsZero())
	// omitzero leaves a zero Stamp out, as it did a zero time.Time.
	b, _ := json.Marshal(struct {
		At Stamp `json:"at,omitzero"`
	}{})
	require.Equal(t, `{}`, string(b))
	// The Unix epoch's own instant is kept apart from "never".
	require.False(t, StampOf(time.Unix(0, 0)).IsZero())
	require.False(t, Stamp(-5).Add(5).IsZero())
	require.True(t, Stamp(0).Add(time.Hour).IsZero(), "never plus an hour is never")
}

func TestStampKeepsTheInstantOfAZonedTime(t *testing.T) {
	zoned := time.Date(2026, 3, 4, 5, 6, 7, 8, time.FixedZone("x", 3600))
	s := StampOf(zoned)
	require.True(t, zoned.Equal(s.Time()))
	require.Equal(t, time.UTC, s.Time().Location())
	var read Stamp
	require.NoError(t, json.Unmarshal([]byte(`"2026-03-04T05:06:07.000000008+01:00"`), &read))
	require.Equal(t, s, read)
}

func TestStampRefusesWhatItCannotHold(t *testing.T) {
	for _, in := range []string{`"1600-01-01T00:00:00Z"`, `"2300-01-01T00:00:00Z"`, `"9999-12-31T23:59:59Z"`} {
		var s Stamp
		require.ErrorIs(t, json.Unmarshal([]byte(in), &s), ErrStampRange, in)
	}
	var s Stamp
	require.Error(t, json.Unmarshal([]byte(`"yesterday"`), &s))
	require.NoError(t, json.Unmarshal([]byte(`null`), &s))
	require.True(t, s.IsZero())
	// StampOf clamps, so a deadline far out stays far out, not wrapped.
	far := StampOf(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC))
	require.Equal(t, Stamp(math.MaxInt64), far)
	require.Equal(t, Stamp(math.MaxInt64), far.Add(time.Hour), "Add saturates")
	require.Equal(t, Stamp(math.MinInt64+1), Stamp(math.MinInt64+2).Add(-time.Hour))
}

func TestStampComparesAndSubtractsAsTime(t *testing.T) {
	a := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := a.Add(1500 * time.Millisecond)
	sa, sb := StampOf(a), StampOf(b)
	require.True(t, sa.Before(sb))
	require.True(t, sb.After(sa))
	require.False(t, sa.Equal(sb))
	require.Equal(t, b.Sub(a), sb.Sub(sa))
	require.Equal(t, StampOf(a.Add(time.Minute)), sa.Add(time.Minute))
	require.Equal(t, a.String(), sa.String())
}
