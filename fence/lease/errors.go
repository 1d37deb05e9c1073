package lease

import (
	"errors"
	"net/http"
)

// Sentinel errors returned in Result.Err. Each has one row in errorTable
// below, which gives its stable code and HTTP status; every boundary (the
// cluster API, the Go client, the sidecar's control API) derives its
// mapping from that table.
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
	// ErrCheckpointSeqJump reports a checkpoint whose seq exceeds the
	// latest by more than MaxCheckpointSeqJump.
	ErrCheckpointSeqJump = errors.New("checkpoint seq jumps too far")
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
	// ErrPayloadMismatch reports an intent whose key the journal already
	// holds with another body digest: the write was performed (or is in
	// flight) with a different payload, so it is neither replayed nor
	// sent again, as a downstream using package fence answers 422.
	ErrPayloadMismatch = errors.New("effect key recorded with a different payload")
)

// ErrorInfo is one row of the model's error table.
type ErrorInfo struct {
	// Err is the sentinel.
	Err error
	// Code is its stable short name: the tail of the HTTP problem type and
	// what snapshots record for a remembered request.
	Code string
	// Status is the HTTP status every API answers it with.
	Status int
}

// errorTable is the one place a model error gets its code and status
// (DESIGN.md 3.3). The index of a row is the errCodeID a remembered
// request keeps in memory, so rows are append only; row 0 is "no error".
//
// Statuses: an unknown id is 404; a malformed command 400; everything that
// conflicts with the current state of a task or lease is 409. That
// includes ErrNotHolder: "this session does not hold the lease" is a fact
// about the lease (another session holds it, or nobody does), exactly like
// a stale epoch, and a client reacts to it the same way (stop, re-acquire).
// 403 is left for refusals of the caller's identity or role.
var errorTable = [...]ErrorInfo{
	{nil, "", 0},
	{ErrInvalid, "invalid", http.StatusBadRequest},
	{ErrTaskNotFound, "task_not_found", http.StatusNotFound},
	{ErrTaskExists, "task_exists", http.StatusConflict},
	{ErrSessionNotFound, "session_not_found", http.StatusNotFound},
	{ErrLeaseHeld, "lease_held", http.StatusConflict},
	{ErrTaskWaiting, "task_waiting", http.StatusConflict},
	{ErrTaskFinal, "task_final", http.StatusConflict},
	{ErrNotClaimable, "not_claimable", http.StatusConflict},
	// A claim that finds nothing is a 404 with a body, not a 204: a
	// client then handles one shape (a problem) for every "no", and
	// scripts branch on the code.
	{ErrNoTask, "no_task", http.StatusNotFound},
	{ErrStaleEpoch, "stale_epoch", http.StatusConflict},
	{ErrNotHolder, "not_holder", http.StatusConflict},
	{ErrLeaseNotActive, "lease_not_active", http.StatusConflict},
	{ErrCheckpointSeq, "checkpoint_seq", http.StatusConflict},
	{ErrNotWaiting, "not_waiting", http.StatusConflict},
	{ErrIntentsInFlight, "intents_in_flight", http.StatusConflict},
	{ErrInDoubt, "in_doubt", http.StatusConflict},
	// A full journal is a state of this task, not of the server's disks,
	// so 409 rather than 507 (which generic clients read as a server fault).
	{ErrJournalFull, "journal_full", http.StatusConflict},
	{ErrPayloadMismatch, "payload_mismatch", http.StatusUnprocessableEntity},
	// A different command under a used request id is well-formed but
	// cannot be processed: 422, as Idempotency-Key reuse is downstream.
	{ErrRequestReused, "request_id_reused", http.StatusUnprocessableEntity},
	// Refusals of the caller's identity: 403.
	{ErrNotOwner, "not_owner", http.StatusForbidden},
	{ErrQuota, "quota_exceeded", http.StatusTooManyRequests},
	// A seq too far ahead conflicts with the task's latest, as a seq
	// that does not increase does.
	{ErrCheckpointSeqJump, "checkpoint_seq_jump", http.StatusConflict},
}

// Errors returns every model error with its code and status, in table
// order.
func Errors() []ErrorInfo {
	out := make([]ErrorInfo, len(errorTable)-1)
	copy(out, errorTable[1:])
	return out
}

// ErrorCode returns the stable short name of a model error: of the first
// table error err wraps, "invalid" for any other error, "" for nil.
func ErrorCode(err error) string { return codeOf(err).String() }

// LookupError returns the table row of the first model error err wraps.
func LookupError(err error) (ErrorInfo, bool) {
	if err == nil {
		return ErrorInfo{}, false
	}
	for _, e := range errorTable[1:] {
		if errors.Is(err, e.Err) {
			return e, true
		}
	}
	return ErrorInfo{}, false
}

// errCodeID is the index of an error's row in errorTable; 0 is no error.
type errCodeID uint8

const codeInvalid errCodeID = 1

func (c errCodeID) String() string {
	if int(c) < len(errorTable) {
		return errorTable[c].Code
	}
	return errorTable[codeInvalid].Code
}

func (c errCodeID) err() error {
	if int(c) < len(errorTable) {
		return errorTable[c].Err
	}
	return ErrInvalid
}

// codeOf returns the code of err: the first listed error it wraps, or
// invalid.
func codeOf(err error) errCodeID {
	if err == nil {
		return 0
	}
	for i, e := range errorTable[1:] {
		if errors.Is(err, e.Err) {
			return errCodeID(i + 1)
		}
	}
	return codeInvalid
}

// codeNamed returns the code of a short name; an unknown one is invalid.
func codeNamed(name string) errCodeID {
	for i, e := range errorTable {
		if e.Code == name {
			return errCodeID(i)
		}
	}
	return codeInvalid
}
