package lease

import (
	"errors"
	"math"
	"time"
)

// Stamp is a moment in the model: nanoseconds since the Unix epoch, UTC,
// with 0 meaning "never" (time.Time's zero). A leased task holds nine
// moments; as time.Time each takes 24 bytes (wall, ext and a location
// pointer), as a Stamp 8, which is 144 bytes less per lease in the
// replicated state. Every moment in the model is stamped by the leader (a
// command's Time, or Time plus a bounded duration), so the range of an
// int64 (the years 1678 to 2262) holds them all; the model never needs a
// monotonic reading or a zone, and comparing two Stamps is comparing two
// integers.
//
// On the wire a Stamp is exactly what time.Time.MarshalJSON writes for the
// same moment in UTC, so snapshots and API replies keep their layout. A
// moment read with a zone offset is kept as the same instant and written
// back in UTC.
type Stamp int64

// Range of the moments a Stamp can hold.
var (
	stampMin = time.Unix(0, math.MinInt64+1).UTC()
	stampMax = time.Unix(0, math.MaxInt64).UTC()
)

// ErrStampRange is returned when decoding a moment a Stamp cannot hold.
var ErrStampRange = errors.New("lease: time outside the years 1678-2262")

// StampOf returns t as a Stamp. The zero time is the zero Stamp; a moment
// outside the range is clamped to its nearest end (UnmarshalJSON refuses
// it instead). The single instant of the Unix
// epoch itself, which a leader's clock never reads, becomes one
// nanosecond later so that it is not taken for "never".
func StampOf(t time.Time) Stamp {
	switch {
	case t.IsZero():
		return 0
	case t.Before(stampMin):
		return math.MinInt64 + 1
	case t.After(stampMax):
		return math.MaxInt64
	}
	ns := t.UnixNano()
	if ns == 0 {
		ns = 1
	}
	return Stamp(ns)
}

// Time returns the moment as a UTC time.Time; the zero Stamp is the zero
// time.
func (s Stamp) Time() time.Time {
	if s == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(s)).UTC()
}

// IsZero reports whether s is "never".
func (s Stamp) IsZero() bool { return s == 0 }

// Before reports whether s is earlier than u.
func (s Stamp) Before(u Stamp) bool { return s < u }

// After reports whether s is later than u.
func (s Stamp) After(u Stamp) bool { return s > u }

// Equal reports whether s and u are the same moment.
func (s Stamp) Equal(u Stamp) bool { return s == u }

// Add returns s+d. Adding to the zero Stamp adds to the zero time, which
// is below the range: the result stays "never".
func (s Stamp) Add(d time.Duration) Stamp {
	if s == 0 {
		return 0
	}
	r := s + Stamp(d)
	// Saturate rather than wrap: a wrapped deadline would be in the past.
	if d > 0 && r < s {
		return math.MaxInt64
	}
	if d < 0 && r > s {
		return math.MinInt64 + 1
	}
	if r == 0 {
		r = 1
	}
	return r
}

// Sub returns the duration s-u.
func (s Stamp) Sub(u Stamp) time.Duration { return s.Time().Sub(u.Time()) }

// String formats s as time.Time does, in UTC.
func (s Stamp) String() string { return s.Time().String() }

// AppendJSON appends s as time.Time.MarshalJSON writes it (an RFC 3339
// string with nanoseconds as needed).
func (s Stamp) AppendJSON(b []byte) []byte {
	b = append(b, '"')
	b = s.Time().AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// MarshalJSON implements json.Marshaler.
func (s Stamp) MarshalJSON() ([]byte, error) {
	return s.AppendJSON(make([]byte, 0, len(`"2006-01-02T15:04:05.999999999Z"`))), nil
}

// UnmarshalJSON reads what time.Time.UnmarshalJSON reads (null leaves s as
// it is); a moment outside the range is ErrStampRange.
func (s *Stamp) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var t time.Time
	if err := t.UnmarshalJSON(b); err != nil {
		return err
	}
	v, err := parseStamp(t)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// parseStamp is StampOf that refuses a moment outside the range instead of
// clamping it.
func parseStamp(t time.Time) (Stamp, error) {
	if !t.IsZero() && (t.Before(stampMin) || t.After(stampMax)) {
		return 0, ErrStampRange
	}
	return StampOf(t), nil
}
