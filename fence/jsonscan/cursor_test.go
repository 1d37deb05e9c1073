package jsonscan

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestIntegers(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "-0": 0, " 42": 42, "-9223372036854775808": math.MinInt64, "9223372036854775807": math.MaxInt64} {
		v, ok := New([]byte(in)).Int()
		require.True(t, ok, in)
		require.Equal(t, want, v, in)
	}
	for _, in := range []string{"", "-", "01", "1.5", "1e3", "9223372036854775808", "-9223372036854775809", "x"} {
		_, ok := New([]byte(in)).Int()
		require.False(t, ok, "%q is not a plain int64", in)
	}
	v, ok := New([]byte("18446744073709551615")).Uint()
	require.True(t, ok)
	require.Equal(t, uint64(math.MaxUint64), v)
	for _, in := range []string{"18446744073709551616", "-1", "00"} {
		_, ok := New([]byte(in)).Uint()
		require.False(t, ok, "%q is not a plain uint64", in)
	}
}

func TestStrings(t *testing.T) {
	p := New([]byte(` "a b" ,"c"`))
	tok, ok := p.Token()
	require.True(t, ok)
	require.Equal(t, `"a b"`, string(tok))
	require.True(t, p.Lit(','))
	s, ok := p.Str()
	require.True(t, ok)
	require.Equal(t, "c", s)
	require.True(t, p.End())
	for _, in := range []string{`"a\"b"`, "\"a\x01\"", `"open`, `x`} {
		_, ok := New([]byte(in)).Raw()
		require.False(t, ok, "%q is not a plain string", in)
	}
	b, ok := New([]byte(`""`)).Base64()
	require.True(t, ok)
	require.NotNil(t, b, "as encoding/json: empty, not nil")
	require.Empty(t, b)
	b, ok = New([]byte(`"aGk="`)).Base64()
	require.True(t, ok)
	require.Equal(t, "hi", string(b))
	_, ok = New([]byte(`"a"`)).Base64()
	require.False(t, ok)
}

func TestWordsAndObjects(t *testing.T) {
	v, ok := New([]byte(" true")).Bool()
	require.True(t, ok && v)
	v, ok = New([]byte("false")).Bool()
	require.True(t, ok && !v)
	_, ok = New([]byte("nul")).Bool()
	require.False(t, ok)
	got := map[string]int64{}
	p := New([]byte(`{ "a" : 1 , "b":2 } `))
	require.True(t, p.Object(func(k []byte) bool {
		n, ok := p.Int()
		got[string(k)] = n
		return ok
	}))
	require.True(t, p.End())
	require.Equal(t, map[string]int64{"a": 1, "b": 2}, got)
	for _, in := range []string{`{"a":1,}`, `{"a" 1}`, `{"a":1`, `[]`} {
		p := New([]byte(in))
		require.False(t, p.Object(func([]byte) bool { _, ok := p.Int(); return ok }), in)
	}
}
