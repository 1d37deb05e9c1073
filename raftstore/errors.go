package raftstore

import (
	"errors"
	"fmt"

	"github.com/fencepost/fencepost/fence/lease"
)

// Sentinel errors of the store. Every error a Store method returns either is
// one of these, wraps one of these, or wraps a lease model error (test with
// errors.Is(err, lease.ErrStaleEpoch) and friends). The HTTP layer maps each
// sentinel to one status code and problem type.
var (
	// ErrNotLeader reports a mutation or linearizable read sent to a node that
	// is not the leader; the caller forwards it to LeaderHTTP().
	ErrNotLeader = errors.New("raftstore: not the leader")
	// ErrNoLeader reports that no leader is known (an election is running) or
	// that the leader has not finished taking office; retry shortly.
	ErrNoLeader = errors.New("raftstore: no leader")
	// ErrInvalidArgument reports input the store refuses before proposing it
	// (bad ids, bad UTF-8, out-of-range durations, unknown outcomes, ...).
	ErrInvalidArgument = errors.New("raftstore: invalid argument")
	// ErrUnknownProfile reports a task profile the configuration does not define.
	ErrUnknownProfile = errors.New("raftstore: unknown profile")
	// ErrTooLarge reports a payload, checkpoint or journal body over its bound.
	ErrTooLarge = errors.New("raftstore: too large")
	// ErrTimeout reports a proposal whose outcome is unknown (the leader was
	// lost mid-commit, or the deadline passed). Retry with the same request
	// id: the model de-duplicates, so the retry has its effect at most once.
	ErrTimeout = errors.New("raftstore: timeout, outcome unknown")
	// ErrShutdown reports a store that is closed or closing.
	ErrShutdown = errors.New("raftstore: shut down")
	// ErrNotReady reports a node that has not caught up with the leader yet.
	ErrNotReady = errors.New("raftstore: not ready")
	// ErrMembership reports a membership change the store refused before
	// making it: a joiner that cannot prove it is the member it names (its
	// raft address does not answer with a member certificate for that id),
	// or a removal that would leave no voter. Nothing was changed.
	ErrMembership = errors.New("raftstore: membership change refused")
	// ErrConfig reports an invalid Config; the message names the field.
	ErrConfig = errors.New("raftstore: invalid config")
)

// ModelError is a lease model refusal (errors.Is(err, lease.ErrStaleEpoch)
// and friends work through Unwrap). It carries the task's current epoch
// when the refusal concerned a known task, so a stale holder learns how far
// behind it is without another round trip.
type ModelError struct {
	// Op is the refused operation.
	Op lease.Op
	// Err is the model's sentinel, possibly wrapped with detail.
	Err error
	// Epoch is the task's highest epoch (0 when unknown).
	Epoch uint64
}

// Error implements error.
func (e *ModelError) Error() string { return fmt.Sprintf("raftstore: %s: %v", e.Op, e.Err) }

// Unwrap returns the model error.
func (e *ModelError) Unwrap() error { return e.Err }

// CurrentEpoch returns the task's current epoch (0 when unknown).
func (e *ModelError) CurrentEpoch() uint64 { return e.Epoch }
