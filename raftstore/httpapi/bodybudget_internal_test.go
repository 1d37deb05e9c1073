package httpapi

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBodyBudgetIsSharedAndPerIdentity: one identity stops at its quarter,
// all together at the total, and released bytes come back.
func TestBodyBudgetIsSharedAndPerIdentity(t *testing.T) {
	b := newBodyBudget(400)
	var held []func()
	for range 4 {
		r, err := b.take("sidecar/a", true, 25)
		require.NoError(t, err)
		held = append(held, r)
	}
	_, err := b.take("sidecar/a", true, 1)
	require.ErrorIs(t, err, ErrBodyBudget)
	require.ErrorContains(t, err, "its share is 100")
	for _, who := range []string{"sidecar/b", "sidecar/c", "sidecar/d"} {
		r, err := b.take(who, true, 100)
		require.NoError(t, err)
		held = append(held, r)
	}
	_, err = b.take("sidecar/e", true, 1)
	require.ErrorIs(t, err, ErrBodyBudget, "the total is spent")
	for _, r := range held {
		r()
	}
	r, err := b.take("sidecar/e", true, 100)
	require.NoError(t, err)
	r()
	require.Zero(t, b.used)
	require.Empty(t, b.by)
	_, err = b.take("dev/dev", false, 400)
	require.NoError(t, err, "the dev identity has no share, only the total")
	require.Equal(t, "unavailable", problemFor(err2(b), "").Code)
}

func err2(b *bodyBudget) error { _, err := b.take("x", true, 1); return err }
