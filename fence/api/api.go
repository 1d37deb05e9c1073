// Package api holds the lease cluster's HTTP wire types: the request and
// response bodies of every /v1 route, the route paths, and the problem
// types. The cluster's server (raftstore) and its Go client (used by the
// sidecar and ctl) both import it, so the two can never disagree on the
// wire. It contains no I/O.
//
// Durations on the wire are integer milliseconds in fields ending in "Ms";
// byte fields are standard base64 (encoding/json's []byte).
package api

import (
	"time"

	"github.com/fencepost/fencepost/fence/lease"
)

// HeaderRequestID carries the client-chosen id of a mutating request. The
// cluster de-duplicates on it, so a retry after an unknown outcome (a leader
// lost mid-commit) has its effect once.
const HeaderRequestID = "X-Request-Id"

// Routes. {id} is a task id, {sid} a session id, both path-escaped.
const (
	PathSessions  = "/v1/sessions"                 // POST open
	PathSession   = "/v1/sessions/{sid}"           // DELETE close
	PathWatch     = "/v1/sessions/{sid}/watch"     // GET long-poll for lease changes
	PathHeartbeat = "/v1/sessions/{sid}/heartbeat" // POST
	// PathHeartbeatStream is upgraded (hbstream.go) to a long-lived stream
	// of heartbeats for any of the caller's sessions.
	PathHeartbeatStream = "/v1/heartbeats/stream"                // POST with Upgrade: HeartbeatStreamProtocol
	PathTasks           = "/v1/tasks"                            // POST create, GET list
	PathTask            = "/v1/tasks/{id}"                       // GET, DELETE (final tasks only)
	PathAcquire         = "/v1/tasks/{id}/acquire"               // POST
	PathClaim           = "/v1/claim"                            // POST
	PathCheckpoint      = "/v1/tasks/{id}/checkpoint"            // POST
	PathWait            = "/v1/tasks/{id}/wait"                  // POST
	PathSignal          = "/v1/tasks/{id}/signal"                // POST
	PathRelease         = "/v1/tasks/{id}/release"               // POST complete / fail / give back
	PathRevoke          = "/v1/tasks/{id}/revoke"                // POST
	PathCancel          = "/v1/tasks/{id}/cancel"                // POST
	PathIntent          = "/v1/tasks/{id}/journal"               // POST record an intent
	PathOutcome         = "/v1/tasks/{id}/journal/{key}/outcome" // POST record an outcome
	PathLeases          = "/v1/leases"                           // GET list live leases
	PathKeys            = "/v1/keys"                             // GET signing public keys
	PathCluster         = "/v1/cluster"                          // GET status
	PathClusterJoin     = "/v1/cluster/join"                     // POST
	PathClusterRemove   = "/v1/cluster/remove"                   // POST
	PathSnapshot        = "/v1/snapshot"                         // GET a backup of the whole state (operators)
	PathHealth          = "/healthz"
	PathReady           = "/readyz"
	PathMetrics         = "/metrics"
)

// QueryStale, set to "true" on a GET, allows a read from the local replica
// without the linearizable ReadIndex round.
const QueryStale = "stale"

// QueryBodies, set to "true" on GET PathTasks or PathTask, includes the
// bodies a read leaves out by default (payload, checkpoint data, signal,
// result, journaled response bodies); it needs the read.bodies permission.
const QueryBodies = "bodies"

// OpenSessionRequest opens a session for a worker. SessionID is optional;
// when given, re-opening it is idempotent.
type OpenSessionRequest struct {
	SessionID string `json:"sessionId,omitempty"`
	WorkerID  string `json:"workerId"`
}

// Session is the reply to OpenSessionRequest.
type Session struct {
	SessionID string `json:"sessionId"`
	WorkerID  string `json:"workerId"`
}

// HeldLease names a lease the heartbeating sidecar believes it holds.
type HeldLease struct {
	TaskID string `json:"taskId"`
	Epoch  uint64 `json:"epoch"`
	// SinceProgressMs is how long before this heartbeat was sent the
	// worker last showed progress under this lease (a progress mark or a
	// checkpoint), at least 1; absent (0) when it has shown none. The
	// leader keeps the latest in memory and enforces the profile's
	// progress timeout from it (DESIGN.md 17), so a mark costs no raft
	// write. At most MaxSinceProgressMs.
	SinceProgressMs uint64 `json:"sinceProgressMs,omitempty"`
}

// MaxSinceProgressMs bounds HeldLease.SinceProgressMs (30 days): a larger
// value says nothing a progress timeout could use.
const MaxSinceProgressMs = 30 * 24 * 3600 * 1000

// HeartbeatRequest renews the session and every lease held through it.
// Leases lists what the sidecar believes it holds, so the cluster can tell
// it about each one (and raise an alarm for one someone else holds).
type HeartbeatRequest struct {
	Leases []HeldLease `json:"leases,omitempty"`
}

// Lease signals ride the heartbeat reply.
const (
	SignalNone    = ""        // still held; renewed for ValidForMs
	SignalRevived = "revived" // was suspect_dead, active again with the same epoch
	SignalRevoked = "revoked" // taken away by an operator or conflict
	SignalLost    = "lost"    // expired, reclaimed, released, or superseded
	SignalWaiting = "waiting" // closed by a wait
)

// LeaseState is the cluster's answer for one lease in a heartbeat reply.
type LeaseState struct {
	TaskID     string       `json:"taskId"`
	Epoch      uint64       `json:"epoch"`
	Status     lease.Status `json:"status"`
	ValidForMs int64        `json:"validForMs"`
	Signal     string       `json:"signal,omitempty"`
	Reason     string       `json:"reason,omitempty"`
}

// HeartbeatResponse acknowledges a heartbeat. ValidForMs is a duration,
// never an absolute time: the sidecar adds it to the heartbeat's send time
// on its own monotonic clock, minus a safety margin. Leases holds one entry
// per lease the session holds or the request named.
type HeartbeatResponse struct {
	ValidForMs int64        `json:"validForMs"`
	Leases     []LeaseState `json:"leases"`
}

// Query parameters of GET PathWatch.
const (
	QueryWatchSince   = "since"     // the version the caller has seen (0 at start)
	QueryWatchTimeout = "timeoutMs" // how long to wait for a newer one (capped by the server)
)

// WatchResponse answers a watch: Version counts the changes applied to the
// session's leases on the answering node (revoked, cancelled, suspect,
// expired, released, ...). It is a nudge, not the news: a sidecar that sees
// the version move sends a heartbeat at once and acts on its reply, so a
// revocation reaches the sidecar in one round trip instead of up to one
// heartbeat interval. Versions are per node; a caller that switches node
// starts again from 0.
type WatchResponse struct {
	Version uint64 `json:"version"`
}

// CreateTaskRequest creates a pending task. Profile picks TTL and heartbeat
// interval from the cluster's profiles (default profile when empty).
type CreateTaskRequest struct {
	TaskID   string `json:"taskId"`
	Profile  string `json:"profile,omitempty"`
	Priority int    `json:"priority,omitempty"`
	Payload  []byte `json:"payload,omitempty"`
}

// AcquireRequest grants a named task to a session. With Create, a missing
// task is created with Profile and Priority first.
type AcquireRequest struct {
	SessionID string `json:"sessionId"`
	Create    bool   `json:"create,omitempty"`
	Profile   string `json:"profile,omitempty"`
	Priority  int    `json:"priority,omitempty"`
}

// ClaimRequest grants the most urgent claimable task to a session.
type ClaimRequest struct {
	SessionID string `json:"sessionId"`
}

// Grant is the reply to acquire and claim: the new lease, the task with its
// latest checkpoint, the signed token, and the effects an earlier owner left
// in doubt.
type Grant struct {
	Lease          lease.Lease     `json:"lease"`
	Task           lease.Task      `json:"task"`
	ValidForMs     int64           `json:"validForMs"`
	HeartbeatMs    int64           `json:"heartbeatMs"`
	TokenSignature string          `json:"tokenSignature,omitempty"`
	InDoubt        []*lease.Effect `json:"inDoubt,omitempty"`
}

// CheckpointRequest records progress under the caller's epoch. Seq 0 means
// "the next one".
type CheckpointRequest struct {
	SessionID string `json:"sessionId"`
	Epoch     uint64 `json:"epoch"`
	Seq       uint64 `json:"seq,omitempty"`
	Step      string `json:"step,omitempty"`
	Data      []byte `json:"data,omitempty"`
}

// WaitRequest closes the lease and parks the task until a signal or, when
// TimeoutMs > 0, until that long has passed.
type WaitRequest struct {
	SessionID string `json:"sessionId"`
	Epoch     uint64 `json:"epoch"`
	TimeoutMs int64  `json:"timeoutMs,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// SignalRequest wakes a waiting task; Payload is handed to the next owner.
type SignalRequest struct {
	Payload []byte `json:"payload,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// ReleaseRequest ends the caller's lease as completed, failed or given back.
type ReleaseRequest struct {
	SessionID string        `json:"sessionId"`
	Epoch     uint64        `json:"epoch"`
	Outcome   lease.Outcome `json:"outcome"`
	Result    []byte        `json:"result,omitempty"`
	Reason    string        `json:"reason,omitempty"`
}

// RevokeRequest takes a lease away. Epoch 0 revokes whatever lease is live.
type RevokeRequest struct {
	Epoch  uint64 `json:"epoch,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// CancelRequest cancels a task for good.
type CancelRequest struct {
	Reason string `json:"reason,omitempty"`
}

// IntentRequest journals a write before it is made (DESIGN.md 5). It
// commits only while Epoch is current and active.
type IntentRequest struct {
	SessionID  string `json:"sessionId"`
	Epoch      uint64 `json:"epoch"`
	Key        string `json:"key"`
	Method     string `json:"method"`
	URL        string `json:"url"`
	BodyDigest string `json:"bodyDigest,omitempty"`
	DeadlineMs int64  `json:"deadlineMs"`
}

// IntentResponse says whether to make the call: Replay means the key is
// done and Effect holds the recorded response to return instead.
type IntentResponse struct {
	Effect lease.Effect `json:"effect"`
	Replay bool         `json:"replay"`
}

// OutcomeRequest records what a journaled write returned.
type OutcomeRequest struct {
	Epoch  uint64              `json:"epoch"`
	Status int                 `json:"status"`
	Header map[string][]string `json:"header,omitempty"`
	Body   []byte              `json:"body,omitempty"`
}

// TaskList is the reply to GET /v1/tasks. Next, when set, is the After
// value for the next page.
type TaskList struct {
	Tasks []*lease.Task `json:"tasks"`
	Next  string        `json:"next,omitempty"`
}

// LeaseList is the reply to GET /v1/leases, ordered by task id, a page
// at a time like TaskList: Next, when set, is the After of the next page.
type LeaseList struct {
	Leases []lease.Lease `json:"leases"`
	Next   string        `json:"next,omitempty"`
}

// LeasePage selects one page of GET /v1/leases (?after=&limit=): the live
// leases of tasks ordered after After, at most Limit (0: the most a page
// holds).
type LeasePage struct {
	After string
	Limit int
}

// PublicKey is one signing key the cluster has used.
type PublicKey struct {
	ID        string `json:"id"`
	Alg       string `json:"alg"`
	PublicKey []byte `json:"public_key"`
}

// KeyList is the reply to GET /v1/keys.
type KeyList struct {
	Keys []PublicKey `json:"keys"`
}

// Member is one raft voter.
type Member struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr"`
	HTTPAddr string `json:"httpAddr,omitempty"`
	Leader   bool   `json:"leader"`
	// Unreachable is set by the leader when its raft heartbeats to the
	// member fail; LastContact is then when it last heard from it.
	Unreachable bool      `json:"unreachable,omitempty"`
	LastContact time.Time `json:"lastContact,omitzero"`
}

// ClusterStatus is the reply to GET /v1/cluster.
type ClusterStatus struct {
	NodeID       string   `json:"nodeId"`
	State        string   `json:"state"`
	Leader       string   `json:"leader"`
	LeaderHTTP   string   `json:"leaderHttp,omitempty"`
	Term         uint64   `json:"term"`
	CommitIndex  uint64   `json:"commitIndex"`
	AppliedIndex uint64   `json:"appliedIndex"`
	Members      []Member `json:"members"`
	// LastContact is when a follower last heard from the leader (zero on
	// the leader and on a member without one).
	LastContact time.Time `json:"lastContact,omitzero"`
}

// JoinRequest adds a voter; joining with the same id and address again is
// a no-op.
type JoinRequest struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr"`
	HTTPAddr string `json:"httpAddr"`
}

// RemoveRequest removes a voter.
type RemoveRequest struct {
	ID string `json:"id"`
}
