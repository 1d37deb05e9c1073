package raftstore

import (
	"crypto/ed25519"
	"fmt"
	"time"

	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/fence/pki"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Profile sets the lease TTL and the heartbeat interval of a class of tasks
// (DESIGN.md 7).
type Profile struct {
	// TTL is how long a lease lives without a heartbeat.
	TTL time.Duration
	// Heartbeat is the interval the sidecar is told to heartbeat at; at most TTL/3.
	Heartbeat time.Duration
	// ProgressTimeout, when positive, is how long a lease may show no
	// progress (a checkpoint, or a progress mark a heartbeat carries)
	// before the cluster suspects, expires and reclaims it with reason
	// stalled (DESIGN.md 17). Zero: no progress deadline. At least
	// MinProgressTimeout.
	ProgressTimeout time.Duration
}

// MinProgressTimeout is the shortest progress timeout a profile may have:
// its TTL, so a stall is never declared faster than a death would be.
func MinProgressTimeout(p Profile) time.Duration { return p.TTL }

// Defaults applied to zero Config fields.
const (
	// DefaultElectionTimeout is raft's candidate election timeout.
	DefaultElectionTimeout = 300 * time.Millisecond
	// DefaultHeartbeatTimeout is how long a follower waits for the leader
	// before it starts an election.
	DefaultHeartbeatTimeout = 100 * time.Millisecond
	// DefaultLeaderLeaseTimeout is how long a leader keeps leading without
	// hearing from a quorum.
	DefaultLeaderLeaseTimeout = 100 * time.Millisecond
	// DefaultCommitTimeout is raft's idle commit interval.
	DefaultCommitTimeout = 5 * time.Millisecond
	// DefaultSnapshotInterval is how often raft checks whether to snapshot.
	DefaultSnapshotInterval = 30 * time.Second
	// DefaultSnapshotThreshold is the number of new entries that triggers a snapshot.
	DefaultSnapshotThreshold = 8192
	// DefaultTrailingLogs is the number of entries kept after a snapshot.
	DefaultTrailingLogs = 10240
	// DefaultGrace is how long a suspect_dead lease may still be revived.
	DefaultGrace = 5 * time.Second
	// DefaultMinTTL is the smallest profile TTL accepted.
	DefaultMinTTL = time.Second
	// DefaultMaxTTL is the largest profile TTL accepted.
	DefaultMaxTTL = 10 * time.Minute
	// DefaultCheckpointMaxBytes bounds checkpoint data.
	DefaultCheckpointMaxBytes = 1 << 20
	// DefaultQuotaSessions, DefaultQuotaTasks and DefaultQuotaBytes are
	// the per-identity quotas of Config.Quota: generous for one sidecar
	// (a worker needs one session), small enough that one credential
	// cannot fill the cluster's memory. The task quota is half of a
	// downstream MemStore's per-holder share (fence.DefaultMaxTasksPerHolder,
	// 20,000), so a sidecar within its quota never fills its share of a
	// fenced store; the byte quota is a quarter of the cluster-wide
	// budget, DefaultPayloadBudget.
	DefaultQuotaSessions = 64
	DefaultQuotaTasks    = 10_000
	DefaultQuotaBytes    = DefaultPayloadBudget / 4
	// DefaultPayloadBudget bounds the payload bytes all limited identities
	// hold together (Config.PayloadBudget): one identity's share is
	// DefaultQuotaBytes, and however many identities there are, the sum
	// stays what a member can hold. Each payload byte costs a member
	// several in RSS (raft log and its cache, the model, a snapshot being
	// written: the probe measured ~7x), so 128 MiB is about 1 GB of RSS.
	DefaultPayloadBudget = 128 << 20
	// DefaultMaxTaskIDBytes bounds task ids.
	DefaultMaxTaskIDBytes = 256
	// DefaultMaxPayloadBytes bounds payloads, results and journaled bodies.
	DefaultMaxPayloadBytes = 1 << 20
	// DefaultMaxWait bounds wait timeouts and journal deadlines.
	DefaultMaxWait = 7 * 24 * time.Hour
	// DefaultApplyTimeout bounds a call whose context has no deadline.
	DefaultApplyTimeout = 5 * time.Second
	// DefaultProposalsPerTick rate-limits the expiry loop.
	DefaultProposalsPerTick = 256
	// DefaultProfileName is the profile used when a request names none.
	DefaultProfileName = "short"
)

// MaxHeartbeat is the longest heartbeat interval a profile with this TTL
// may have: TTL/3, so two heartbeats can be lost before the lease is
// suspected (DESIGN.md 4.1). It is the one statement of the rule; config
// words its error for the file's keys from it.
func MaxHeartbeat(ttl time.Duration) time.Duration { return ttl / 3 }

// MinTTL is the shortest lease TTL a cluster with this raft election
// timeout accepts: 1.5 × the election timeout, so a leader change fits in
// a lease (DESIGN.md 4.1).
func MinTTL(election time.Duration) time.Duration { return election * 3 / 2 }

// DefaultProfiles are the seed's profiles: short {21s, 7s, progress 5m},
// workflow {45s, 15s, progress 30m}. The progress timeouts fit the seed's
// table: a short task's step takes minutes, a multi-step run's tens of
// minutes.
func DefaultProfiles() map[string]Profile {
	return map[string]Profile{
		"short":    {TTL: 21 * time.Second, Heartbeat: 7 * time.Second, ProgressTimeout: 5 * time.Minute},
		"workflow": {TTL: 45 * time.Second, Heartbeat: 15 * time.Second, ProgressTimeout: 30 * time.Minute},
	}
}

// Config configures a Store. The zero value of every field but NodeID,
// DataDir and RaftAddr is a usable default; Validate reports what is wrong,
// naming the field.
type Config struct {
	// NodeID is this node's raft server id; unique and stable across restarts.
	NodeID string
	// DataDir holds raft.db (log + stable store) and snapshots/.
	DataDir string
	// RaftAddr is the raft TCP bind address ("127.0.0.1:0" picks a port).
	RaftAddr string
	// RaftAdvertise is the raft address other nodes dial; empty means the
	// bound address (which must then not be a wildcard). It may be a DNS
	// name (a StatefulSet's stable name): peers resolve it at every dial.
	RaftAdvertise string
	// TLS, when set, makes raft speak TLS 1.3 with mutual authentication:
	// both sides present member certificates from the cluster CA, and each
	// RPC's sender must be the member its certificate names. Nil is
	// plaintext, for loopback development only (Open logs a warning).
	TLS *pki.Source
	// Dial dials raft peers; nil is a net.Dialer (which resolves names at
	// every dial). Tests inject a resolver here.
	Dial DialFunc
	// HTTPAddr is this node's API address as others should use it when they
	// forward to it; it is replicated so followers can name the leader's.
	HTTPAddr string
	// Bootstrap makes this node form a one-node cluster when its data dir
	// holds no raft state. Others join through Join on the leader.
	Bootstrap bool

	// HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout and CommitTimeout
	// are raft's (see raft.Config). A deposed leader steps down after
	// LeaderLeaseTimeout without a quorum, which bounds how long a partitioned
	// leader can answer anything.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	// SnapshotInterval, SnapshotThreshold and TrailingLogs are raft's
	// snapshot policy.
	SnapshotInterval  time.Duration
	SnapshotThreshold uint64
	TrailingLogs      uint64

	// Profiles maps profile names to TTL and heartbeat interval;
	// DefaultProfile is used when a request names none.
	Profiles       map[string]Profile
	DefaultProfile string
	// Grace is how long a suspect_dead lease may still be revived by its
	// holder's heartbeat before it expires.
	Grace time.Duration
	// MinTTL and MaxTTL bound every profile's TTL.
	MinTTL time.Duration
	MaxTTL time.Duration
	// SessionIdle closes sessions that sent no heartbeat for this long
	// (default 3 × the largest TTL), so the model does not grow forever.
	SessionIdle time.Duration

	// CheckpointMaxBytes bounds checkpoint data; MaxTaskIDBytes task ids;
	// MaxPayloadBytes task payloads, signal payloads, release results and
	// journaled outcome bodies.
	CheckpointMaxBytes int
	MaxTaskIDBytes     int
	MaxPayloadBytes    int
	// MixedVersions says members of the previous release (927f237) may be
	// in the cluster, during a rolling upgrade: the leader then writes
	// nothing they would apply differently or cannot read: transitions one
	// entry each (no entryBatch, which they cannot read), no checkpoint
	// seq window and no payload budget in commands (they would ignore the
	// fields and accept what this build refuses, and replicas would
	// diverge). Turn it off once every member runs this release.
	MixedVersions bool
	// Quota bounds what one identity holds (sessions, tasks, payload
	// bytes) and what all of them hold together (TotalBytes, the payload
	// budget); it applies to callers the API marks Limited (sidecars).
	// The zero Quota takes the defaults; in a set Quota a field <= 0 is
	// unlimited (set it negative to keep it unlimited).
	Quota lease.Quota
	// MaxWait bounds a wait request's timeout.
	MaxWait time.Duration

	// ApplyTimeout bounds a proposal when the caller's context has no deadline.
	ApplyTimeout time.Duration
	// ProposalsPerTick rate-limits the expiry loop's proposals (suspect,
	// expire, reclaim, signal, close) per tick, so an expiry storm after a
	// long outage does not starve client proposals.
	ProposalsPerTick int

	// SigningKey, when set, signs fencing tokens; its public key (and id)
	// is replicated and served by Keys, the private key never leaves this
	// process. Every member needs the same key. Nil signs nothing.
	SigningKey ed25519.PrivateKey

	// Registerer receives the store's Prometheus metrics; nil registers
	// nothing (Metrics still returns a gatherer of them).
	Registerer prometheus.Registerer
	// Logger receives the store's and raft's logs; nil discards them.
	Logger *zap.Logger
	// Clock is the lessor's time source; nil is the real clock.
	Clock Clock

	// Version is the build's version ("v0.2.0", "dev"): stamped on every
	// log entry this node proposes and on backups, so a member that cannot
	// read one can name the version that wrote it (format.go).
	Version string
	// Restore, when its File is set, starts a new cluster from a backup
	// (restore.go); the data dir must hold no raft state.
	Restore Restore

	// transportWrap lets tests wrap the raft transport (partitions).
	transportWrap func(raft.Transport) raft.Transport
}

// WithDefaults returns a copy of c with zero fields set to their defaults:
// the configuration Open runs with.
func (c Config) WithDefaults() Config {
	setD := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	setD(&c.ElectionTimeout, DefaultElectionTimeout)
	setD(&c.HeartbeatTimeout, DefaultHeartbeatTimeout)
	setD(&c.LeaderLeaseTimeout, DefaultLeaderLeaseTimeout)
	setD(&c.CommitTimeout, DefaultCommitTimeout)
	setD(&c.SnapshotInterval, DefaultSnapshotInterval)
	setD(&c.Grace, DefaultGrace)
	setD(&c.MinTTL, DefaultMinTTL)
	setD(&c.MaxTTL, DefaultMaxTTL)
	setD(&c.MaxWait, DefaultMaxWait)
	setD(&c.ApplyTimeout, DefaultApplyTimeout)
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = DefaultSnapshotThreshold
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = DefaultTrailingLogs
	}
	if len(c.Profiles) == 0 {
		c.Profiles = DefaultProfiles()
	}
	if c.DefaultProfile == "" {
		c.DefaultProfile = DefaultProfileName
		if _, ok := c.Profiles[c.DefaultProfile]; !ok && len(c.Profiles) == 1 {
			for name := range c.Profiles {
				c.DefaultProfile = name
			}
		}
	}
	if c.SessionIdle == 0 {
		c.SessionIdle = 3 * c.maxProfileTTL()
	}
	if c.CheckpointMaxBytes == 0 {
		c.CheckpointMaxBytes = DefaultCheckpointMaxBytes
	}
	if c.MaxTaskIDBytes == 0 {
		c.MaxTaskIDBytes = DefaultMaxTaskIDBytes
	}
	if c.Quota == (lease.Quota{}) {
		c.Quota = lease.Quota{Sessions: DefaultQuotaSessions, Tasks: DefaultQuotaTasks, Bytes: DefaultQuotaBytes,
			TotalBytes: DefaultPayloadBudget}
	}
	if c.MaxPayloadBytes == 0 {
		c.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if c.ProposalsPerTick == 0 {
		c.ProposalsPerTick = DefaultProposalsPerTick
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	return c
}

func (c Config) maxProfileTTL() time.Duration {
	var m time.Duration
	for _, p := range c.Profiles {
		m = max(m, p.TTL)
	}
	return m
}

func (c Config) minProfileTTL() time.Duration {
	var m time.Duration
	for _, p := range c.Profiles {
		if m == 0 || p.TTL < m {
			m = p.TTL
		}
	}
	return m
}

// Validate reports the first problem with the configuration (after
// defaults), naming the field and the rule. Open calls it.
func (c Config) Validate() error {
	c = c.WithDefaults()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
	}
	switch {
	case c.NodeID == "":
		return bad("NodeID is required")
	case c.DataDir == "":
		return bad("DataDir is required")
	case c.RaftAddr == "":
		return bad("RaftAddr is required")
	case c.HeartbeatTimeout < 5*time.Millisecond:
		return bad("HeartbeatTimeout %s must be at least 5ms", c.HeartbeatTimeout)
	case c.ElectionTimeout < c.HeartbeatTimeout:
		return bad("ElectionTimeout %s must be at least HeartbeatTimeout %s", c.ElectionTimeout, c.HeartbeatTimeout)
	case c.LeaderLeaseTimeout < 5*time.Millisecond || c.LeaderLeaseTimeout > c.HeartbeatTimeout:
		return bad("LeaderLeaseTimeout %s must be within [5ms, HeartbeatTimeout %s]", c.LeaderLeaseTimeout, c.HeartbeatTimeout)
	case c.CommitTimeout < time.Millisecond:
		return bad("CommitTimeout %s must be at least 1ms", c.CommitTimeout)
	case c.SnapshotInterval < 5*time.Millisecond:
		return bad("SnapshotInterval %s must be at least 5ms", c.SnapshotInterval)
	case c.Grace <= 0:
		return bad("Grace must be positive")
	case c.MinTTL <= 0 || c.MaxTTL < c.MinTTL:
		return bad("MinTTL %s and MaxTTL %s must satisfy 0 < MinTTL <= MaxTTL", c.MinTTL, c.MaxTTL)
	case c.SessionIdle <= 0:
		return bad("SessionIdle must be positive")
	case c.CheckpointMaxBytes < 0 || c.MaxTaskIDBytes < 0 || c.MaxPayloadBytes < 0:
		return bad("size limits must not be negative")
	case c.MaxWait <= 0 || c.ApplyTimeout <= 0 || c.ProposalsPerTick < 0:
		return bad("MaxWait, ApplyTimeout and ProposalsPerTick must be positive")
	case c.SigningKey != nil && len(c.SigningKey) != ed25519.PrivateKeySize:
		return bad("SigningKey must be an Ed25519 private key of %d bytes", ed25519.PrivateKeySize)
	}
	if _, ok := c.Profiles[c.DefaultProfile]; !ok {
		return bad("DefaultProfile %q is not in Profiles", c.DefaultProfile)
	}
	minTTL := MinTTL(c.ElectionTimeout)
	for name, p := range c.Profiles {
		if name == "" || !validID(name, 64) {
			return bad("Profiles: name %q is not a valid id", name)
		}
		switch {
		case p.TTL < c.MinTTL || p.TTL > c.MaxTTL:
			return bad("Profiles[%s].TTL %s must be within [MinTTL %s, MaxTTL %s]", name, p.TTL, c.MinTTL, c.MaxTTL)
		case p.TTL < minTTL:
			return bad("Profiles[%s].TTL %s must be at least 1.5 × ElectionTimeout (%s)", name, p.TTL, minTTL)
		case p.Heartbeat <= 0 || p.Heartbeat > MaxHeartbeat(p.TTL):
			return bad("Profiles[%s].Heartbeat %s must be positive and at most TTL/3 (%s)", name, p.Heartbeat, MaxHeartbeat(p.TTL))
		case p.ProgressTimeout < 0 || (p.ProgressTimeout > 0 && p.ProgressTimeout < MinProgressTimeout(p)):
			return bad("Profiles[%s].ProgressTimeout %s must be 0 (none) or at least the TTL (%s)", name, p.ProgressTimeout, MinProgressTimeout(p))
		}
	}
	return nil
}
