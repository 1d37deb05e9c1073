package raftstore

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/api"
)

// TestSigningKeyNeverEntersTheLog reads every entry of every member's raft
// log: the public key is there, no private key is.
func TestSigningKeyNeverEntersTheLog(t *testing.T) {
	c := newTestCluster(t, 3)
	sid := openSession(t, c.waitForLeader(), "w1")
	g, err := retryLeader(c, func(s *Store) (api.Grant, error) {
		return s.Acquire(ctxT(t), "a1", "t1", api.AcquireRequest{SessionID: sid, Create: true})
	})
	require.NoError(t, err)
	require.NotEmpty(t, g.TokenSignature)
	c.waitConverged()
	seed := testSigningKey.Seed()
	for _, s := range c.live() {
		first, err := s.logs.FirstIndex()
		require.NoError(t, err)
		last, err := s.logs.LastIndex()
		require.NoError(t, err)
		keys := 0
		for i := first; i <= last; i++ {
			var l raft.Log
			require.NoError(t, s.logs.GetLog(i, &l))
			require.False(t, bytes.Contains(l.Data, seed), "entry %d of %s holds the private key", i, s.NodeID())
			if l.Type == raft.LogCommand && len(l.Data) > 0 && entryType(l.Data[0]) == entryKey {
				keys++
				require.NotContains(t, string(l.Data), `"priv"`)
			}
		}
		require.Equal(t, 1, keys, "one public key entry on %s", s.NodeID())
	}
}

// TestReplicatedPrivateKeyIsDropped: a log written by a version that
// replicated a generated key whole still applies, but the private half is
// neither kept nor snapshotted nor used.
func TestReplicatedPrivateKeyIsDropped(t *testing.T) {
	h := newFSMHarness(t)
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	h.entry(entryKey, signingKey{ID: "old", Pub: pub, Priv: priv})
	k, ok := h.f.currentKey()
	require.True(t, ok)
	require.Equal(t, ed25519.PublicKey(pub), k.Pub)
	require.Nil(t, k.Priv)
}

func TestNoConfiguredKeySignsNothing(t *testing.T) {
	c := newTestCluster(t, 1, func(c *Config) { c.SigningKey = nil })
	s := c.waitForLeader()
	sid := openSession(t, s, "w1")
	g, err := s.Acquire(ctxT(t), "a1", "t1", api.AcquireRequest{SessionID: sid, Create: true})
	require.NoError(t, err)
	require.Empty(t, g.TokenSignature)
	require.Empty(t, s.Keys().Keys)
}
