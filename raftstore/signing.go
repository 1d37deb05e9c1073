package raftstore

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"

	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/fence/api"
)

// ensureSigningKey runs when a leader takes office. With a configured key,
// its public half is replicated (once) so every node serves it from Keys;
// the private half never enters the log. Without one, the first leader of
// the cluster generates a key and replicates it whole, so any later leader
// signs with the same key.
func (s *Store) ensureSigningKey(ctx context.Context) error {
	cur, ok := s.fsm.currentKey()
	if priv := s.cfg.SigningKey; priv != nil {
		pub := priv.Public().(ed25519.PublicKey)
		if ok && bytes.Equal(cur.Pub, pub) {
			return nil
		}
		_, err := s.applyEntry(ctx, entryKey, signingKey{ID: fence.KeyID(pub), Pub: pub})
		return err
	}
	if ok {
		return nil
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return fmt.Errorf("raftstore: generate signing key: %w", err)
	}
	_, err = s.applyEntry(ctx, entryKey, signingKey{ID: fence.KeyID(pub), Pub: pub, Priv: priv})
	return err
}

// signer returns the private key grants are signed with: the configured
// one, else the replicated current key (nil before the first leader made one).
func (s *Store) signer() ed25519.PrivateKey {
	if s.cfg.SigningKey != nil {
		return s.cfg.SigningKey
	}
	if k, ok := s.fsm.currentKey(); ok && len(k.Priv) == ed25519.PrivateKeySize {
		return k.Priv
	}
	return nil
}

// signToken returns the X-Fencing-Signature value binding task, epoch and
// holder, or "" when no key is available yet.
func (s *Store) signToken(task string, epoch uint64, holder string) string {
	priv := s.signer()
	if priv == nil {
		return ""
	}
	return fence.Sign(priv, task, epoch, holder)
}

// Keys returns every public key the cluster has signed with, newest last,
// from the local replica.
func (s *Store) Keys() api.KeyList {
	keys := s.fsm.allKeys()
	out := api.KeyList{Keys: make([]api.PublicKey, 0, len(keys))}
	for _, k := range keys {
		out.Keys = append(out.Keys, api.PublicKey{ID: k.ID, Alg: fence.AlgEd25519, PublicKey: append([]byte(nil), k.Pub...)})
	}
	return out
}
