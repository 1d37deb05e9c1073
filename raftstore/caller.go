package raftstore

import (
	"context"
	"fmt"

	"github.com/fencepost/fencepost/fence/lease"
)

// Caller is who a request comes from, as the API authenticated it. The
// store writes Owner into every command it proposes for the request, so
// the model refuses a session-scoped command from anyone but the session's
// owner (lease.ErrNotOwner), and charges Limited callers' sessions and
// tasks against Config.Quota.
type Caller struct {
	// Owner names the identity ("role/name"); "" means a caller trusted
	// with every session (the leader's own proposals, operators).
	Owner string
	// Limited applies the per-identity quotas.
	Limited bool
}

type callerKey struct{}

// WithCaller returns ctx carrying c; the API does this once per request.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// callerOf returns the caller ctx carries (the zero Caller when none).
func callerOf(ctx context.Context) Caller {
	c, _ := ctx.Value(callerKey{}).(Caller)
	return c
}

// stampCaller writes the caller and, for commands that take a share of a
// quota, the configured quota into cmd.
func (s *Store) stampCaller(ctx context.Context, cmd *lease.Command) {
	c := callerOf(ctx)
	cmd.Owner = c.Owner
	if !c.Limited || c.Owner == "" {
		return
	}
	switch {
	case cmd.Op == lease.OpOpenSession, cmd.Op == lease.OpCreateTask, cmd.Op == lease.OpAcquire && cmd.Create:
		q := s.cfg.Quota
		if s.cfg.MixedVersions {
			q.TotalBytes = 0 // see Config.MixedVersions
		}
		cmd.Quota = &q
	}
}

// checkSessionOwner refuses a non-raft session call (heartbeat, watch) from
// an identity other than the session's owner; the caller holds the model.
func checkSessionOwner(ctx context.Context, m *lease.Model, sid string) error {
	c := callerOf(ctx)
	if c.Owner == "" {
		return nil
	}
	if owner, ok := m.SessionOwner(sid); ok && owner != "" && owner != c.Owner {
		return fmt.Errorf("raftstore: session %q: %w", sid, lease.ErrNotOwner)
	}
	return nil
}
