package fence

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseEpoch(t *testing.T) {
	good := map[string]uint64{
		"1":                    1,
		"5":                    5,
		"10":                   10,
		"18446744073709551615": 1<<64 - 1,
	}
	for s, want := range good {
		got, err := ParseEpoch(s)
		require.NoError(t, err, "%q", s)
		require.Equal(t, want, got, "%q", s)
		require.Equal(t, s, FormatEpoch(got))
	}
	bad := []string{
		"", "0", "00", "007", " 5", "5 ", "+5", "-1", "5,6", "abc", "1e3", "0x10",
		"18446744073709551616", "99999999999999999999", "184467440737095516150",
		"５", "5\n", "\t5", "1_000",
	}
	for _, s := range bad {
		_, err := ParseEpoch(s)
		require.ErrorIs(t, err, ErrMalformedToken, "%q must be rejected", s)
	}
}

func TestValidTaskAndHolder(t *testing.T) {
	for _, s := range []string{"t", "task-42", "租约/任务 1", strings.Repeat("a", MaxTaskLen), "\uFFFD"} {
		require.NoError(t, ValidTask(s), "%q", s)
		require.NoError(t, ValidHolder(s), "%q", s)
	}
	for _, s := range []string{"", strings.Repeat("a", MaxTaskLen+1), "a\nb", "a\x00", "tab\there", "\x7f", "a\u0085b", "bad\xffutf8"} {
		require.ErrorIs(t, ValidTask(s), ErrMalformedTask, "%q", s)
		require.ErrorIs(t, ValidHolder(s), ErrMalformedHolder, "%q", s)
	}
}

func TestValidIdempotencyKey(t *testing.T) {
	for _, k := range []string{"k", "order-1:step-2", "!~", strings.Repeat("x", MaxIdempotencyKeyLen)} {
		require.NoError(t, ValidIdempotencyKey(k), "%q", k)
	}
	for _, k := range []string{"", " ", "a b", "a\tb", "é", "a\x7f", strings.Repeat("x", MaxIdempotencyKeyLen+1)} {
		require.ErrorIs(t, ValidIdempotencyKey(k), ErrInvalidIdempotencyKey, "%q", k)
	}
}

// FuzzParseToken checks that ParseEpoch accepts exactly the canonical
// decimal spellings of 1..2^64-1, and that they round-trip.
func FuzzParseToken(f *testing.F) {
	for _, s := range []string{"1", "0", "007", " 5", "5,6", "-1", "abc", "", "18446744073709551615", "18446744073709551616", "+1", "1 ", "٣"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseEpoch(s)
		n, stdErr := strconv.ParseUint(s, 10, 64)
		canonical := stdErr == nil && n != 0 && strconv.FormatUint(n, 10) == s
		if !canonical {
			require.Error(t, err, "%q is not canonical but was accepted", s)
			require.True(t, errors.Is(err, ErrMalformedToken))
			return
		}
		require.NoError(t, err, "%q is canonical", s)
		require.Equal(t, n, e)
		require.Equal(t, s, FormatEpoch(e))
	})
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
