package fence

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRefreshingKeysFetchesOnUnknownID: a rotated key is picked up by the
// first write that needs it; made-up key ids cause at most one fetch per
// interval; known keys survive a fetch that fails.
func TestRefreshingKeysFetchesOnUnknownID(t *testing.T) {
	pub1, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	pub2, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	served := NewStaticKeys(pub1)
	fail := false
	fetch := func(context.Context) (StaticKeys, error) {
		if fail {
			return nil, context.DeadlineExceeded
		}
		return served, nil
	}
	now := time.Unix(1000, 0)
	r := NewRefreshingKeys(NewStaticKeys(pub1), fetch, time.Second, func() time.Time { return now })

	_, ok := r.PublicKey(KeyID(pub1))
	require.True(t, ok)
	require.Equal(t, 0, r.Refetches(), "a known key needs no fetch")

	served = NewStaticKeys(pub2) // the cluster rotated
	k, ok := r.PublicKey(KeyID(pub2))
	require.True(t, ok)
	require.Equal(t, pub2, k)
	require.Equal(t, 1, r.Refetches())
	_, ok = r.PublicKey(KeyID(pub1))
	require.True(t, ok, "an old key is kept")

	now = now.Add(time.Second)
	for i := range 1000 {
		_, ok := r.PublicKey("0123456789abcdef" + string(rune('a'+i%6)))
		require.False(t, ok)
	}
	require.Equal(t, 2, r.Refetches(), "unknown ids fetch at most once per interval")
	now = now.Add(time.Second)
	fail = true
	_, ok = r.PublicKey("ffffffffffffffff")
	require.False(t, ok)
	require.Equal(t, 3, r.Refetches())
	_, ok = r.PublicKey(KeyID(pub2))
	require.True(t, ok, "a failed fetch drops nothing")
}
