package request

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/proxy/clock"
	"github.com/fencepost/fencepost/proxy/leases"
	"github.com/fencepost/fencepost/proxy/proxytrace"
)

// ReadPolicy says what happens to a read (a request classified as safe)
// when the task it belongs to has no current lease.
type ReadPolicy string

// Read policies.
const (
	// ReadsAllow forwards reads without a lease, unstamped. Reads with a
	// current lease are always stamped.
	ReadsAllow ReadPolicy = "allow"
	// ReadsBlock treats a read without a lease like a write: 409.
	ReadsBlock ReadPolicy = "block"
)

// WriteRule refines the method-based write classification for one host
// and path prefix. Rules are tried in order; the first that matches
// decides. An empty Host, PathPrefix or Methods matches anything.
type WriteRule struct {
	// Host is a host name, "host:port", or "*.suffix" for any subdomain.
	Host string
	// PathPrefix is matched against the request path. A rule that marks
	// requests as reads (Write false) matches only when both the raw and
	// the normalised path have the prefix, so dot-segments or escapes
	// cannot turn a write into a read; a write rule matches when either
	// does.
	PathPrefix string
	// Methods restricts the rule to these methods (case-insensitive).
	Methods []string
	// Write is the classification of matching requests.
	Write bool
}

// TLSOrigin makes the sidecar speak verified TLS to Host although the
// worker calls http://Host (Istio's TLS origination). The upstream port
// is the one in the worker's URL, or 443 when it names none.
type TLSOrigin struct {
	// Host is the host name (or host:port) the worker calls.
	Host string
	// ServerName overrides the name verified in the certificate; default
	// the host name.
	ServerName string
	// CAFile is a PEM bundle of roots to trust instead of the system pool.
	CAFile string
}

// Settings is what the request path needs of the sidecar's configuration,
// defaults already applied (package proxy owns the defaults and checks).
type Settings struct {
	WorkerID  string   // stamped as the holder
	Endpoints []string // the cluster's API, never a proxy target
	// ProgressOnWrites and ProgressOnReads make a forwarded write (read)
	// mark progress for its task (worker.progress_calls).
	ProgressOnWrites, ProgressOnReads bool
	// RefuseTargets are more host:port destinations never proxied to,
	// such as the members' raft addresses (reach.go).
	RefuseTargets     []string
	ReadsWithoutLease ReadPolicy
	WriteRules        []WriteRule // tried in order, before the presets' rules
	WritePresets      []string    // names in Presets
	TLSOriginate      []TLSOrigin
	SignatureHosts    []string // nil: the signature goes everywhere
	// UpstreamCAFile holds the roots intercepted upstreams are verified
	// against ("" the system pool).
	UpstreamCAFile string
	// JournalRules are the routes whose writes are journaled; Journal
	// is the cluster's journal, set when they are.
	JournalRules   []JournalRule
	Journal        Journal
	MaxJournalBody int64
	// Tracer makes each request a span (nil: tracing off, a nil check per
	// step and nothing else).
	Tracer *proxytrace.Tracer

	MaxRequestBody      int
	MaxResponseBody     int64
	MaxHeaderBytes      int
	DialTimeout         time.Duration
	UpstreamTimeout     time.Duration
	ReadTimeout         time.Duration
	UpstreamIdleTimeout time.Duration
	ClusterTimeout      time.Duration

	Logger     *zap.Logger
	Registerer prometheus.Registerer
	Clock      clock.Clock
}

// Leases is what the request path asks of the lease keeper
// (*leases.Keeper): whether a task may write now and under which lease,
// and the little more that keys and the journal need. The decision
// itself stays in the keeper.
type Leases interface {
	// Check returns the task's lease and "" when a write may leave now,
	// else why not.
	Check(taskID string) (leases.Ref, leases.Reason)
	// Recheck asks again right before the send; a new epoch is leases.ReasonLost.
	Recheck(l leases.Ref) (leases.Ref, leases.Reason)
	// TaskIDs lists the held leases' tasks (for an ambiguous request).
	TaskIDs() []string
	// NextWrite returns the checkpoint and ordinal a derived key uses.
	NextWrite(taskID string, epoch uint64) (seq, ordinal uint64, ok bool)
	// SessionFor is the open session of the task's cluster, which its
	// journal entries name.
	SessionFor(taskID string) string
	// LostByCluster drops a lease the cluster says is no longer held.
	LostByCluster(taskID string, epoch uint64, err error) bool
	// MarkProgress records a progress mark for the task's current lease.
	MarkProgress(taskID string) (leases.Ref, leases.Reason)
	// ReportBlocked hands a blocked call to the report for the task's
	// history; it never blocks.
	ReportBlocked(b leases.Blocked)
}

// ErrInvalidConfig marks a setting the request path cannot use (a CA file
// that does not load). It is package proxy's ErrInvalidConfig: a caller
// tests for that one.
var ErrInvalidConfig = errors.New("invalid proxy config")
