// Package lease owns fencepost's lease model: tasks, sessions, leases,
// checkpoints and the effect journal, and every transition between their
// states. It is pure and deterministic: Model.Apply is a function of the
// current state, a Command and the raft index it was committed at. It never
// reads the clock (the leader stamps the time into each command) and never
// does I/O, so every replica that applies the same log reaches the same state,
// and the property tests can drive it with random command sequences.
//
// The raft FSM in raftstore is a thin shell over Model; the leader's
// in-memory heartbeat bookkeeping decides *when* to propose OpSuspect,
// OpExpire and OpReclaim, but whether such a proposal still applies is
// decided here, by comparing the epoch it carries with the current one.
package lease

import "errors"

// Sentinel errors returned in Result.Err. The HTTP layer maps each one to a
// status code and a problem type exactly once.
var (
	// ErrInvalid reports a command that is malformed (missing ids, unknown op).
	ErrInvalid = errors.New("invalid command")
	// ErrTaskNotFound reports a task id the model does not know.
	ErrTaskNotFound = errors.New("task not found")
	// ErrTaskExists reports a create for a task id that already exists.
	ErrTaskExists = errors.New("task already exists")
	// ErrSessionNotFound reports an unknown or closed session.
	ErrSessionNotFound = errors.New("session not found")
	// ErrLeaseHeld reports an acquire of a task another session holds.
	ErrLeaseHeld = errors.New("task is leased by another holder")
	// ErrTaskWaiting reports an acquire of a task waiting for an external signal.
	ErrTaskWaiting = errors.New("task is waiting for an external signal")
	// ErrTaskFinal reports an operation on a completed, failed or cancelled task.
	ErrTaskFinal = errors.New("task is completed, failed or cancelled")
	// ErrNotClaimable reports an acquire of a task whose previous lease has
	// not been through the resume guard yet (suspect_dead or expired).
	ErrNotClaimable = errors.New("task is not claimable yet")
	// ErrNoTask reports a claim that found nothing claimable.
	ErrNoTask = errors.New("no claimable task")
	// ErrStaleEpoch reports a command whose expected epoch is not the task's
	// current one: the caller's lease was superseded.
	ErrStaleEpoch = errors.New("stale epoch")
	// ErrNotHolder reports a command from a session that does not hold the lease.
	ErrNotHolder = errors.New("session does not hold the lease")
	// ErrLeaseNotActive reports a holder command on a lease that is no longer
	// active (suspect_dead, expired, released, revoked, ...).
	ErrLeaseNotActive = errors.New("lease is not active")
	// ErrCheckpointSeq reports a checkpoint whose seq does not increase.
	ErrCheckpointSeq = errors.New("checkpoint seq must increase")
	// ErrNotWaiting reports a signal for a task that is not waiting.
	ErrNotWaiting = errors.New("task is not waiting")
	// ErrIntentsInFlight reports a reclaim proposed before every in-flight
	// journaled write reached its deadline.
	ErrIntentsInFlight = errors.New("journaled writes still in flight")
	// ErrInDoubt reports an intent whose key was recorded by an earlier owner
	// with no outcome: the effect may or may not have happened.
	ErrInDoubt = errors.New("effect in doubt")
	// ErrJournalFull reports a task whose journal reached its size bound.
	ErrJournalFull = errors.New("effect journal full")
	// ErrRequestReused reports a request id already used for a different
	// command: replaying the first command's answer would claim this one
	// was applied.
	ErrRequestReused = errors.New("request id already used for a different command")
	// ErrNotOwner reports a command on a session (or a lease held through
	// one) made by an identity other than the one that opened the session.
	ErrNotOwner = errors.New("session belongs to another identity")
	// ErrQuota reports a command that would take an identity past one of
	// its quotas (sessions, tasks, stored bytes).
	ErrQuota = errors.New("quota exceeded")
)
