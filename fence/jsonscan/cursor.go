// Package jsonscan reads the plain shape of JSON that the hot paths parse
// by hand (heartbeats, raft command entries): any JSON whitespace between
// tokens, strings without escapes or control characters, integers without
// fraction or exponent. Every method answers false for anything outside
// that shape, and its callers then hand the whole input to encoding/json,
// which decides and words any error; so a caller's fast path never
// accepts what encoding/json would refuse nor reads anything differently
// (the callers' fuzz targets hold each one to that).
//
// A Cursor does not check UTF-8: its callers check the whole input once
// (encoding/json replaces invalid bytes, so such input must take the slow
// path).
package jsonscan

import (
	"encoding/base64"
	"math"
)

// Cursor is a position in a JSON input.
type Cursor struct {
	b []byte
	i int
}

// New returns a cursor at the start of b.
func New(b []byte) *Cursor { return &Cursor{b: b} }

// Rest returns what is left of the input.
func (p *Cursor) Rest() []byte { return p.b[p.i:] }

// SkipSpace returns the index of the first byte at or after i in b that
// is not JSON whitespace.
func SkipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func (p *Cursor) ws() { p.i = SkipSpace(p.b, p.i) }

// End reports whether only whitespace is left.
func (p *Cursor) End() bool {
	p.ws()
	return p.i == len(p.b)
}

// Lit consumes c after optional whitespace.
func (p *Cursor) Lit(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// Peek reports whether the next non-space byte is c, without consuming it.
func (p *Cursor) Peek(c byte) bool {
	p.ws()
	return p.i < len(p.b) && p.b[p.i] == c
}

// Word consumes the literal w (true, false, null) after optional
// whitespace.
func (p *Cursor) Word(w string) bool {
	p.ws()
	if len(p.b)-p.i >= len(w) && string(p.b[p.i:p.i+len(w)]) == w {
		p.i += len(w)
		return true
	}
	return false
}

// Token reads a string without escapes or control characters and returns
// it as it stands in the input, quotes included (what an
// UnmarshalJSON method is given).
func (p *Cursor) Token() ([]byte, bool) {
	if !p.Lit('"') {
		return nil, false
	}
	start := p.i - 1
	for p.i < len(p.b) {
		switch c := p.b[p.i]; {
		case c == '"':
			p.i++
			return p.b[start:p.i], true
		case c == '\\' || c < 0x20:
			return nil, false
		}
		p.i++
	}
	return nil, false
}

// Raw is Token without the quotes: the string's bytes in the input, not
// copied (keys are only compared).
func (p *Cursor) Raw() ([]byte, bool) {
	t, ok := p.Token()
	if !ok {
		return nil, false
	}
	return t[1 : len(t)-1], true
}

// Str is Raw as a string of its own (for values that outlive the input).
func (p *Cursor) Str() (string, bool) {
	b, ok := p.Raw()
	return string(b), ok
}

// Base64 reads a string as encoding/json reads one into a []byte: standard
// base64, decoded into a new slice (empty, not nil, for "").
func (p *Cursor) Base64() ([]byte, bool) {
	s, ok := p.Raw()
	if !ok {
		return nil, false
	}
	b := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
	n, err := base64.StdEncoding.Decode(b, s)
	return b[:n], err == nil
}

// Bool reads true or false.
func (p *Cursor) Bool() (bool, bool) {
	if p.Word("true") {
		return true, true
	}
	return false, p.Word("false")
}

// digits reads a JSON integer's digits (no leading zero, no fraction or
// exponent after) as a uint64.
func (p *Cursor) digits() (uint64, bool) {
	start := p.i
	var v uint64
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		d := uint64(p.b[p.i] - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
		p.i++
	}
	n := p.i - start
	if n == 0 || (n > 1 && p.b[start] == '0') {
		return 0, false
	}
	if p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		return 0, false
	}
	return v, true
}

// Uint reads a JSON integer without sign that fits in a uint64.
func (p *Cursor) Uint() (uint64, bool) {
	p.ws()
	return p.digits()
}

// Int reads a JSON integer, maybe negative, that fits in an int64.
func (p *Cursor) Int() (int64, bool) {
	p.ws()
	neg := p.i < len(p.b) && p.b[p.i] == '-'
	if neg {
		p.i++
	}
	v, ok := p.digits()
	switch {
	case !ok:
		return 0, false
	case neg && v <= 1<<63:
		return int64(-v), true // -(1<<63) wraps to itself: MinInt64
	case !neg && v <= math.MaxInt64:
		return int64(v), true
	}
	return 0, false
}

// IntOf reads an int: Int, refused where it does not fit (as
// encoding/json refuses it on a 32-bit build).
func (p *Cursor) IntOf() (int, bool) {
	v, ok := p.Int()
	return int(v), ok && int64(int(v)) == v
}

// Object reads one object: field is called with each key and reads its
// value. Whether a key may repeat is the caller's rule.
func (p *Cursor) Object(field func(key []byte) bool) bool {
	if !p.Lit('{') {
		return false
	}
	if p.Lit('}') {
		return true
	}
	for {
		key, ok := p.Raw()
		if !ok || !p.Lit(':') || !field(key) {
			return false
		}
		if p.Lit('}') {
			return true
		}
		if !p.Lit(',') {
			return false
		}
	}
}
