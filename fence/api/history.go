package api

import (
	"fmt"
	"time"

	"github.com/fencepost/fencepost/fence/lease"
)

// Routes of the cluster's recent history (reader role and up).
const (
	// PathTaskHistory is GET: the recent events of one task, oldest first.
	PathTaskHistory = "/v1/tasks/{id}/history"
	// PathEvents is GET: a long-poll for the events every task saw after
	// ?since= (QueryWatchSince, QueryWatchTimeout), oldest first.
	PathEvents = "/v1/events"
	// GET PathSessions (beside POST, which opens one) lists open sessions.

	// PathTaskBlocked is POST (sidecar role): a sidecar's report of the
	// writes for the task it blocked itself (BlockedReport), recorded on
	// the task's history as an EventBlocked; answered 204.
	PathTaskBlocked = "/v1/tasks/{id}/blocked"
)

// Kinds of HistoryEvent beyond the command ops' names (lease.Op.String:
// create_task, acquire, claim, checkpoint, wait, signal, release, revoke,
// cancel, suspect, revive, expire, reclaim, intent, outcome, delete_task,
// open_session, close_session).
const (
	// EventInDoubt is one journaled write the resume guard reported in
	// doubt when it reclaimed the task.
	EventInDoubt = "in_doubt"
	// EventSessionRelease is a lease given back because its session closed.
	EventSessionRelease = "session_release"
	// EventBlocked is a sidecar's report of writes it blocked itself for
	// want of a current lease (PathTaskBlocked): such a write never
	// reached the cluster or a fenced service.
	EventBlocked = "blocked"
)

// HistoryEvent is one change the cluster applied (or refused) for a task
// or a session, derived from the raft entry that carried it. Only the
// fields the kind sets are present; bodies (payloads, checkpoint data,
// responses) are never included.
type HistoryEvent struct {
	// Seq orders events on the answering node; it is not replicated.
	Seq uint64 `json:"seq"`
	// Index is the raft index of the entry, the same on every node.
	Index uint64 `json:"index"`
	// Time is the time the leader stamped into the entry.
	Time      time.Time       `json:"time"`
	Kind      string          `json:"kind"`
	TaskID    string          `json:"taskId,omitempty"`
	Epoch     uint64          `json:"epoch,omitempty"`
	WorkerID  string          `json:"workerId,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Status    lease.Status    `json:"status,omitempty"`
	State     lease.TaskState `json:"state,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	// By is the sidecar identity ("role/name") whose request carried the
	// change. It is empty for an operator's request (the cluster's audit
	// log names the operator) and for the leader's own (suspect, expire,
	// reclaim).
	By string `json:"by,omitempty"`
	// Checkpoint fields.
	CheckpointSeq uint64 `json:"checkpointSeq,omitempty"`
	Step          string `json:"step,omitempty"`
	// Journal fields.
	Key         string            `json:"key,omitempty"`
	Method      string            `json:"method,omitempty"`
	URL         string            `json:"url,omitempty"`
	EffectState lease.EffectState `json:"effectState,omitempty"`
	HTTPStatus  int               `json:"httpStatus,omitempty"`
	// Error is the problem code when the cluster refused the command
	// (stale_epoch for an old owner's write, say): a refusal is history too.
	Error string `json:"error,omitempty"`
	// Blocked fields (EventBlocked): Reason is the sidecar's block reason
	// (expired, suspect, revoked, waiting, no_lease), Method and URL the
	// first blocked call (host and path, never the query), Count how many
	// it blocked for the task since its previous report, and TraceID the
	// W3C trace id of the first one's span when it was traced.
	Count   uint64 `json:"count,omitempty"`
	TraceID string `json:"traceId,omitempty"`
}

// TaskHistory is the reply to GET PathTaskHistory. Dropped counts the
// older events the bound pushed out (README "Console").
type TaskHistory struct {
	TaskID  string         `json:"taskId"`
	Events  []HistoryEvent `json:"events"`
	Dropped uint64         `json:"dropped,omitempty"`
}

// EventFeed is the reply to GET PathEvents. Next is the since of the next
// call; since 0 asks for the current position (answered at once, without
// events, once the node has any). Reset means events between since and the first one returned are
// gone (the caller fell behind the feed's bound, or asked another node or
// a restarted one): a caller showing state reads it again.
type EventFeed struct {
	Events []HistoryEvent `json:"events"`
	Next   uint64         `json:"next"`
	Reset  bool           `json:"reset,omitempty"`
	// Feed names the answering node's feed (random per process): a caller
	// whose since came from another feed (another member, or this one
	// before a restart) ignores the answer's events and starts again from
	// Next.
	Feed string `json:"feed"`
}

// SessionInfo is one open session as GET PathSessions lists it.
// HeartbeatAt is the leader's last heartbeat from it (zero when the
// answering member is not the leader or it has not heartbeated since the
// leader took office).
type SessionInfo struct {
	SessionID   string    `json:"sessionId"`
	WorkerID    string    `json:"workerId"`
	Owner       string    `json:"owner,omitempty"`
	CreatedAt   time.Time `json:"createdAt"`
	HeartbeatAt time.Time `json:"heartbeatAt,omitzero"`
	Leases      int       `json:"leases"`
}

// SessionList is the reply to GET PathSessions (reader role and up),
// ordered by session id; Next, when set, is the ?after= of the next page.
type SessionList struct {
	Sessions []SessionInfo `json:"sessions"`
	Next     string        `json:"next,omitempty"`
}

// Bounds of a BlockedReport's fields.
const (
	MaxBlockedReason = 32
	MaxBlockedMethod = 16
	MaxBlockedURL    = 512
)

// BlockedReport is the body of POST PathTaskBlocked: the writes for one
// task a sidecar blocked since its previous report. The cluster records
// it only from the identity that opened SessionID, and only when that
// session held the task's lease at Epoch: a sidecar can speak of its own
// leases, never of another's.
type BlockedReport struct {
	SessionID string `json:"sessionId"`
	// Epoch is the lease the blocked writes were made under: the last
	// one the sidecar held for the task.
	Epoch uint64 `json:"epoch"`
	// Reason is why they were blocked (the sidecar's reason: expired,
	// suspect, revoked, waiting, lost, released).
	Reason string `json:"reason"`
	// Method and URL (scheme-less host and path, never the query) name
	// the first blocked call; TraceID is its W3C trace id when traced.
	Method  string `json:"method,omitempty"`
	URL     string `json:"url,omitempty"`
	TraceID string `json:"traceId,omitempty"`
	// Count is how many writes were blocked (at least 1).
	Count uint64 `json:"count"`
}

// Check reports the first field of r that breaks its rule.
func (r *BlockedReport) Check() error {
	switch {
	case r.SessionID == "":
		return fmt.Errorf("sessionId is required")
	case r.Epoch == 0:
		return fmt.Errorf("epoch must be the held lease's epoch (at least 1)")
	case r.Count == 0:
		return fmt.Errorf("count must be at least 1")
	case !isToken(r.Reason, MaxBlockedReason, false):
		return fmt.Errorf("reason must be 1 to %d of a-z and _", MaxBlockedReason)
	case r.Method != "" && !isToken(r.Method, MaxBlockedMethod, true):
		return fmt.Errorf("method must be an HTTP method of at most %d letters", MaxBlockedMethod)
	case len(r.URL) > MaxBlockedURL || !printableASCII(r.URL):
		return fmt.Errorf("url must be at most %d printable ASCII bytes", MaxBlockedURL)
	case r.TraceID != "" && !isTraceID(r.TraceID):
		return fmt.Errorf("traceId must be 32 lowercase hex digits, not all zero")
	}
	return nil
}

// isToken: 1 to n bytes of a-z and _ (upper: of A-Z).
func isToken(s string, n int, upper bool) bool {
	if len(s) == 0 || len(s) > n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if upper && (c < 'A' || c > 'Z') || !upper && (c < 'a' || c > 'z') && c != '_' {
			return false
		}
	}
	return true
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// isTraceID is W3C trace-context's rule for a trace id.
func isTraceID(s string) bool {
	if len(s) != 32 {
		return false
	}
	zero := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
		zero = zero && c == '0'
	}
	return !zero
}
