package raftstore

import (
	"bytes"
	"context"
	"crypto/ed25519"

	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/fence/api"
)

// ensureSigningKey runs when a leader takes office. With a configured key
// (a file every member holds), its public half is replicated (once, by id)
// so every node serves it from Keys; the private half never enters the
// log. Without one the cluster signs nothing: there is no key a raft log
// or a data directory could leak (DESIGN.md, "The signing key").
func (s *Store) ensureSigningKey(ctx context.Context) error {
	priv := s.cfg.SigningKey
	if priv == nil {
		s.log.Warn("no signing key configured (signing.key_file): fencing tokens are not signed; fenced services requiring signatures will refuse them")
		return nil
	}
	pub := priv.Public().(ed25519.PublicKey)
	if cur, ok := s.fsm.currentKey(); ok && bytes.Equal(cur.Pub, pub) {
		return nil
	}
	_, err := s.applyEntry(ctx, entryKey, signingKey{ID: fence.KeyID(pub), Pub: pub})
	return err
}

// signer returns the private key grants are signed with: the configured
// one, nil when none is.
func (s *Store) signer() ed25519.PrivateKey { return s.cfg.SigningKey }

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
