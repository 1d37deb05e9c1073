package proxy

import (
	"github.com/fencepost/fencepost/proxy/clock"
	"github.com/fencepost/fencepost/proxy/control"
	"github.com/fencepost/fencepost/proxy/leases"
	"github.com/fencepost/fencepost/proxy/reply"
	"github.com/fencepost/fencepost/proxy/request"
)

// The names below are the sidecar's public face, each defined by the part
// that owns it; they stand here so that a user of the sidecar (cmd,
// config, the tests, SDK docs) needs package proxy alone.

// Lease keeping (package proxy/leases) and its time source (proxy/clock).
type (
	// Cluster is what the sidecar needs from the lease cluster.
	Cluster = leases.Cluster
	// Event is one lease event of Sidecar.Subscribe.
	Event = leases.Event
	// EventKind names the kind of an Event.
	EventKind = leases.EventKind
	// LeaseView is the local view of one lease (Sidecar.Leases, GET /v1/lease).
	LeaseView = leases.View
	// ClusterState is one cluster's part of the sidecar (Sidecar.Clusters).
	ClusterState = leases.ClusterState
	// Clock is the sidecar's time source.
	Clock = clock.Clock
	// Timer is the subset of *time.Timer the sidecar uses.
	Timer = clock.Timer
	// SystemClock is the real clock.
	SystemClock = clock.System
)

// Lease event kinds.
const (
	EventAcquired = leases.EventAcquired
	EventLost     = leases.EventLost
	EventReleased = leases.EventReleased
	EventRevived  = leases.EventRevived
	EventRevoked  = leases.EventRevoked
)

// DeadlineCheckDisabled is true only in the deliberately broken build
// (fencepost_broken_nodeadline), whose sidecar never lets a lease lapse.
const DeadlineCheckDisabled = leases.DeadlineCheckDisabled

// The keeper's sentinel errors.
var (
	// ErrNoSession means the sidecar has no open session with the cluster
	// yet (or lost it and is reopening), so lease calls cannot be made.
	ErrNoSession = leases.ErrNoSession
	// ErrNoLease means the sidecar holds no current lease for the task a
	// call names.
	ErrNoLease = leases.ErrNoLease
	// ErrAmbiguousTask means several leases are held and the call did not
	// say which task it is for.
	ErrAmbiguousTask = leases.ErrAmbiguousTask
)

// The request path (package proxy/request): the rule and policy types of
// Config, and the effect journal.
type (
	// ReadPolicy says what happens to a read without a current lease.
	ReadPolicy = request.ReadPolicy
	// WriteRule refines the write classification (request.WriteRule).
	WriteRule = request.WriteRule
	// TLSOrigin makes the sidecar speak verified TLS upstream (request.TLSOrigin).
	TLSOrigin = request.TLSOrigin
	// Journal is the effect journal the cluster client provides.
	Journal = request.Journal
	// JournalRule marks writes whose effect is journaled.
	JournalRule = request.JournalRule
)

// Read policies (request.ReadsAllow, request.ReadsBlock).
const (
	ReadsAllow = request.ReadsAllow
	ReadsBlock = request.ReadsBlock
)

// Presets are the named write-rule sets of Config.WritePresets.
var Presets = request.Presets

// PresetNames returns the preset names, sorted.
func PresetNames() []string { return request.PresetNames() }

// Worker-facing headers.
const (
	HeaderTaskSelect       = request.HeaderTaskSelect
	HeaderActionID         = request.HeaderActionID
	HeaderJournalTruncated = request.HeaderJournalTruncated
	HeaderShouldRetry      = reply.HeaderShouldRetry
)

// The control API's routes and bodies (package proxy/control).
const (
	PathAcquire    = control.PathAcquire
	PathClaim      = control.PathClaim
	PathCheckpoint = control.PathCheckpoint
	PathWait       = control.PathWait
	PathComplete   = control.PathComplete
	PathFail       = control.PathFail
	PathGiveBack   = control.PathGiveBack
	PathLease      = control.PathLease
	PathEvents     = control.PathEvents
	PathAttach     = control.PathAttach
	PathProgress   = control.PathProgress
	PathCA         = control.PathCA
	PathCAPEM      = control.PathCAPEM
	PathHealth     = control.PathHealth
	PathReady      = control.PathReady
	PathMetrics    = control.PathMetrics
)

// Control API bodies and replies.
type (
	AcquireRequest    = control.AcquireRequest
	GrantReply        = control.GrantReply
	CheckpointRequest = control.CheckpointRequest
	WaitRequest       = control.WaitRequest
	ReleaseRequest    = control.ReleaseRequest
	LeaseReply        = control.LeaseReply
)

// Problem type tails of the sidecar (package proxy/reply holds the table).
const (
	CodeLeaseExpired          = reply.CodeLeaseExpired
	CodeLeaseSuspect          = reply.CodeLeaseSuspect
	CodeLeaseRevoked          = reply.CodeLeaseRevoked
	CodeLeaseWaiting          = reply.CodeLeaseWaiting
	CodeNoLease               = reply.CodeNoLease
	CodeAmbiguousTask         = reply.CodeAmbiguousTask
	CodeNotProxyRequest       = reply.CodeNotProxyRequest
	CodeConnectFenced         = reply.CodeConnectFenced
	CodeBadRequest            = reply.CodeBadRequest
	CodeUpgrade               = reply.CodeUpgrade
	CodeTooLarge              = reply.CodeTooLarge
	CodeHeaderTooLarge        = reply.CodeHeaderTooLarge
	CodeRequestTimeout        = reply.CodeRequestTimeout
	CodeUpstreamTimeout       = reply.CodeUpstreamTimeout
	CodeUpstreamError         = reply.CodeUpstreamError
	CodeLeaseLostMid          = reply.CodeLeaseLostMid
	CodeNoSession             = reply.CodeNoSession
	CodeClusterError          = reply.CodeClusterError
	CodeNotFound              = reply.CodeNotFound
	CodeMethod                = reply.CodeMethod
	CodeEffectInDoubt         = reply.CodeEffectInDoubt
	CodeJournalUnavailable    = reply.CodeJournalUnavailable
	CodeHostMismatch          = reply.CodeHostMismatch
	CodeUpstreamTLS           = reply.CodeUpstreamTLS
	CodeWriteAlreadyPerformed = reply.CodeWriteAlreadyPerformed
	CodeSelfTarget            = reply.CodeSelfTarget
	CodeControlRefused        = reply.CodeControlRefused
)
