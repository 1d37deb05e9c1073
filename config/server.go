package config

import (
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/fencepost/fencepost/raftstore"
	"github.com/fencepost/fencepost/raftstore/httpapi"
)

// Server configures one node of the lease cluster (fencepost server).
type Server struct {
	// NodeID is the raft server id; unique and stable across restarts.
	NodeID string `yaml:"node_id" doc:"raft node id, unique and stable (default: derived from the host name)"`
	// DataDir holds the raft log, stable store and snapshots.
	DataDir string `yaml:"data_dir" doc:"raft log, stable store and snapshots (default ./fencepost-data/<node_id>)"`
	// HTTPAddr is where the cluster's HTTP API listens.
	HTTPAddr string `yaml:"http_addr" doc:"cluster HTTP API listen address"`
	// HTTPAdvertise is the API address other members forward requests to
	// (and sidecars are told about); it must be a concrete host. Empty
	// means http_addr, which then must not be a wildcard.
	HTTPAdvertise string `yaml:"http_advertise" doc:"API address other members forward to (default: http_addr)"`
	// RaftAddr is where raft's TCP transport listens.
	RaftAddr string `yaml:"raft_addr" doc:"raft transport listen address"`
	// RaftAdvertise is the raft address other nodes dial; it must be a
	// concrete host, never a wildcard.
	RaftAdvertise string `yaml:"raft_advertise" doc:"raft address other nodes dial (default: raft_addr)"`
	// Bootstrap makes this node start a new single-node cluster if its data
	// directory is empty. After Load it is never nil.
	Bootstrap *bool `yaml:"bootstrap" doc:"bootstrap a new cluster when the data dir is empty (default: true when join is empty)"`
	// Join lists HTTP endpoints of existing members to join through.
	Join []string `yaml:"join" doc:"cluster HTTP endpoints to join through (host:port, comma-separated)"`
	// Raft holds the raft timing knobs.
	Raft Raft `yaml:"raft"`
	// Leases holds lease profiles and limits.
	Leases Leases `yaml:"leases"`
	// Pprof serves Go's profiler on the API port under /debug/pprof/.
	Pprof bool `yaml:"pprof" doc:"serve Go's profiler under /debug/pprof/ on http_addr"`
	// BodyReaders names reader identities (certificate CommonName) that
	// may also read task bodies: payloads, checkpoint data, signals,
	// results (GET ...?bodies=true). Operators always may.
	BodyReaders []string `yaml:"body_readers" doc:"reader identities (certificate CN) allowed to read task payloads and checkpoint data"`
	// Signing configures the token signing key.
	Signing Signing `yaml:"signing"`
	// TLS is this member's identity: mutual TLS on the raft port, TLS on
	// the API. Empty means plaintext, allowed only while http_addr,
	// raft_addr and their advertised forms are on loopback.
	TLS CertFiles `yaml:"tls"`
	// Tracing configures OpenTelemetry traces (off by default).
	Tracing Tracing `yaml:"tracing"`
	// Log configures logging.
	Log Log `yaml:"log"`
}

// Raft holds the hashicorp/raft settings fencepost exposes.
type Raft struct {
	// HeartbeatTimeout is how long a follower waits for the leader before
	// starting an election.
	HeartbeatTimeout Duration `yaml:"heartbeat_timeout" doc:"follower wait for leader contact before an election"`
	// ElectionTimeout is how long a candidate waits before retrying; lease
	// TTLs must outlast 1.5 of it so a failover cannot expire healthy leases.
	ElectionTimeout Duration `yaml:"election_timeout" doc:"candidate wait before a new election"`
	// LeaderLeaseTimeout is how long a leader stays leader without contact
	// with a quorum.
	LeaderLeaseTimeout Duration `yaml:"leader_lease_timeout" doc:"leader step-down time without quorum contact"`
	// CommitTimeout bounds how long an append waits to be batched.
	CommitTimeout Duration `yaml:"commit_timeout" doc:"max wait before sending an append batch"`
	// SnapshotInterval is how often raft checks whether to snapshot.
	SnapshotInterval Duration `yaml:"snapshot_interval" doc:"how often to check whether to snapshot"`
	// SnapshotThreshold is how many new log entries trigger a snapshot.
	SnapshotThreshold uint64 `yaml:"snapshot_threshold" doc:"new log entries that trigger a snapshot"`
	// TrailingLogs is how many entries stay in the log after a snapshot so
	// slow followers can catch up without a full snapshot.
	TrailingLogs uint64 `yaml:"trailing_logs" doc:"log entries kept after a snapshot"`
	// MixedVersions says members of the previous release may still be in
	// the cluster (a rolling upgrade): the leader then writes only what
	// they apply alike (raftstore.Config.MixedVersions).
	MixedVersions bool `yaml:"mixed_versions" doc:"a rolling upgrade from the previous release is under way: write nothing older members apply differently (no batched expiry, seq window or payload budget)"`
}

// Leases holds the lease profiles and limits the cluster enforces.
type Leases struct {
	// DefaultProfile is used when a task is created without a profile.
	DefaultProfile string `yaml:"default_profile" doc:"profile used when a task names none"`
	// Profiles maps a profile name to its TTL and heartbeat interval. A file
	// adds profiles and changes fields of the default ones (short,
	// workflow); it cannot remove them.
	Profiles map[string]Profile `yaml:"profiles" doc:"lease profiles: name -> {ttl, heartbeat}"`
	// Grace is how long a lease stays suspect_dead before it expires; a
	// heartbeat inside the grace revives it with the same epoch.
	Grace Duration `yaml:"grace" doc:"suspect_dead -> expired grace"`
	// MinTTL is the absolute floor for any profile's TTL.
	MinTTL Duration `yaml:"min_ttl" doc:"lowest TTL any profile may have"`
	// MaxTTL is the ceiling for any profile's TTL.
	MaxTTL Duration `yaml:"max_ttl" doc:"highest TTL any profile may have"`
	// CheckpointMaxBytes caps one checkpoint's payload.
	CheckpointMaxBytes ByteSize `yaml:"checkpoint_max_bytes" doc:"largest checkpoint payload"`
	// MaxTaskIDBytes caps the length of a task id.
	MaxTaskIDBytes int `yaml:"max_task_id_bytes" doc:"longest task id in bytes"`
	// Quota bounds what one sidecar identity may hold (429 past it).
	Quota Quota `yaml:"quota"`
}

// Quota bounds what one sidecar identity (client certificate) holds in
// the cluster; 0 is unlimited.
type Quota struct {
	// Sessions bounds its open sessions.
	Sessions int `yaml:"sessions" doc:"open sessions per sidecar identity (0: unlimited)"`
	// Tasks bounds the tasks it created and nobody deleted yet.
	Tasks int `yaml:"tasks" doc:"undeleted tasks a sidecar identity created (0: unlimited)"`
	// Bytes bounds the payload bytes of those tasks.
	Bytes ByteSize `yaml:"bytes" doc:"payload bytes of those tasks (0: unlimited)"`
	// ClusterBytes bounds the payload bytes all sidecar identities hold
	// together: the budget Bytes is one identity's share of.
	ClusterBytes ByteSize `yaml:"cluster_bytes" doc:"payload bytes all sidecar identities hold together, the member's budget (0: unlimited)"`
	// RequestsPerSecond and RequestBurst bound its API requests (a token
	// bucket per identity; 429 rate_limited past them). One sidecar
	// certificate shared by a whole fleet needs them raised.
	RequestsPerSecond int `yaml:"requests_per_second" doc:"API requests per second per sidecar identity (0: unlimited)"`
	RequestBurst      int `yaml:"request_burst" doc:"requests a sidecar identity may make at once above that rate (0: unlimited)"`
}

// Profile is a lease TTL and the heartbeat interval that keeps it alive.
type Profile struct {
	// TTL is how long a lease lives without a heartbeat.
	TTL Duration `yaml:"ttl" doc:"lease time to live"`
	// Heartbeat is the interval the sidecar heartbeats at; at most TTL/3 so
	// two heartbeats can be lost before the lease lapses.
	Heartbeat Duration `yaml:"heartbeat" doc:"heartbeat interval, at most ttl/3"`
	// ProgressTimeout is how long a lease may show no progress (a
	// checkpoint or a progress mark) before the cluster reclaims it with
	// reason stalled; 0: no progress deadline (DESIGN.md 17).
	ProgressTimeout Duration `yaml:"progress_timeout" doc:"reclaim a lease that shows no progress (checkpoint or progress mark) for this long, reason stalled (0: never; else >= ttl)"`
}

// Signing configures the Ed25519 key that signs fencing tokens.
type Signing struct {
	// KeyFile is a PEM or raw Ed25519 private key, the same file on every
	// member; only its public half is replicated. Empty: nothing is signed.
	KeyFile string `yaml:"key_file" doc:"Ed25519 private key file, the same on every member; it never enters the raft log (empty: tokens are not signed)"`
}

// DefaultServer returns the server defaults. NodeID, DataDir, RaftAdvertise
// and Bootstrap are left empty: Load derives them once every layer is applied.
func DefaultServer() *Server {
	// Every value the store has a default for comes from raftstore, which
	// owns it; only the addresses are the CLI's own.
	profiles := map[string]Profile{}
	for name, p := range raftstore.DefaultProfiles() {
		profiles[name] = Profile{TTL: Duration(p.TTL), Heartbeat: Duration(p.Heartbeat), ProgressTimeout: Duration(p.ProgressTimeout)}
	}
	return &Server{
		HTTPAddr: "127.0.0.1:7400",
		RaftAddr: "127.0.0.1:7401",
		Raft: Raft{
			HeartbeatTimeout:   Duration(raftstore.DefaultHeartbeatTimeout),
			ElectionTimeout:    Duration(raftstore.DefaultElectionTimeout),
			LeaderLeaseTimeout: Duration(raftstore.DefaultLeaderLeaseTimeout),
			CommitTimeout:      Duration(raftstore.DefaultCommitTimeout),
			SnapshotInterval:   Duration(raftstore.DefaultSnapshotInterval),
			SnapshotThreshold:  raftstore.DefaultSnapshotThreshold,
			TrailingLogs:       raftstore.DefaultTrailingLogs,
		},
		Leases: Leases{
			DefaultProfile:     raftstore.DefaultProfileName,
			Profiles:           profiles,
			Grace:              Duration(raftstore.DefaultGrace),
			MinTTL:             Duration(raftstore.DefaultMinTTL),
			MaxTTL:             Duration(raftstore.DefaultMaxTTL),
			CheckpointMaxBytes: raftstore.DefaultCheckpointMaxBytes,
			MaxTaskIDBytes:     raftstore.DefaultMaxTaskIDBytes,
			Quota: Quota{Sessions: raftstore.DefaultQuotaSessions, Tasks: raftstore.DefaultQuotaTasks,
				Bytes: raftstore.DefaultQuotaBytes, ClusterBytes: raftstore.DefaultPayloadBudget,
				RequestsPerSecond: httpapi.DefaultRatePerIdentity,
				RequestBurst:      httpapi.DefaultRateBurst},
		},
		Tracing: defaultTracing(),
		Log:     defaultLog(),
	}
}

// Role returns RoleServer.
func (s *Server) Role() Role { return RoleServer }

// ShouldBootstrap reports the effective bootstrap setting.
func (s *Server) ShouldBootstrap() bool {
	if s.Bootstrap == nil {
		return len(s.Join) == 0
	}
	return *s.Bootstrap
}

// hostname is replaceable in tests.
var hostname = os.Hostname

// hostID derives an identifier from the host name: lower case, anything
// outside [a-z0-9.-] turned into '-', at most 64 bytes; "node" if unknown.
func hostID() string {
	h, err := hostname()
	if err != nil {
		return "node"
	}
	id := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
			return r
		}
		return '-'
	}, strings.ToLower(h))
	id = strings.Trim(id, "-.")
	if len(id) > 64 {
		id = id[:64]
	}
	if id == "" {
		return "node"
	}
	return id
}

// fill derives node_id, data_dir, raft_advertise and bootstrap.
func (s *Server) fill() {
	if s.NodeID == "" {
		s.NodeID = hostID()
	}
	if s.DataDir == "" {
		s.DataDir = "./fencepost-data/" + s.NodeID
	}
	if s.RaftAdvertise == "" {
		s.RaftAdvertise = s.RaftAddr
	}
	if s.Bootstrap == nil {
		b := len(s.Join) == 0
		s.Bootstrap = &b
	}
}

// Validate checks every rule that does not depend on the host.
func (s *Server) Validate() error {
	var p problems
	checkName(&p, "node_id", s.NodeID)
	if s.DataDir == "" {
		p.invalid("data_dir", "must not be empty")
	}
	_, httpPort, httpOK := checkAddr(&p, "http_addr", s.HTTPAddr)
	_, raftPort, raftOK := checkAddr(&p, "raft_addr", s.RaftAddr)
	if httpOK && raftOK && httpPort != 0 && httpPort == raftPort {
		p.invalid("raft_addr", "must differ from http_addr (both use port %d)", raftPort)
	}
	if s.HTTPAdvertise != "" {
		if host, port, ok := checkAddr(&p, "http_advertise", s.HTTPAdvertise); ok && (isUnspecified(host) || port == 0) {
			p.invalid("http_advertise", "must be a host and non-zero port other members can reach (got %q)", s.HTTPAdvertise)
		}
	} else if host, _, err := net.SplitHostPort(s.HTTPAddr); err == nil && isUnspecified(host) {
		p.invalid("http_advertise", "must be set when http_addr is a wildcard (%q): other members forward requests to it", s.HTTPAddr)
	}
	if host, port, ok := checkAddr(&p, "raft_advertise", s.RaftAdvertise); ok && (isUnspecified(host) || port == 0) {
		p.invalid("raft_advertise", "must be a host and non-zero port other nodes can dial (got %q); set it when raft_addr is a wildcard or port 0", s.RaftAdvertise)
	}
	for i, ep := range s.Join {
		checkEndpoint(&p, indexKey("join", i), ep)
	}
	if s.Bootstrap != nil && *s.Bootstrap && len(s.Join) > 0 {
		p.invalid("bootstrap", "must be false when join is set: a node either starts a new cluster or joins one")
	}
	s.TLS.validate(&p, "tls")
	if !s.TLS.Enabled() {
		requireLoopbackWithoutTLS(&p, "tls.cert_file", [2]string{"http_addr", s.HTTPAddr}, [2]string{"raft_addr", s.RaftAddr},
			[2]string{"http_advertise", s.HTTPAdvertise}, [2]string{"raft_advertise", s.RaftAdvertise})
	}
	s.Raft.validate(&p)
	s.Leases.validate(&p, s.Raft.ElectionTimeout)
	s.Tracing.validate(&p)
	s.Log.validate(&p)
	return p.err()
}

// raftFloor is hashicorp/raft's own minimum for its timeouts; checking it
// here reports it with the key name instead of a bare library error.
const raftFloor = Duration(5 * time.Millisecond)

// validate checks the raft timings against each other and raft's floors.
func (r Raft) validate(p *problems) {
	checkAtLeast(p, "raft.heartbeat_timeout", r.HeartbeatTimeout, raftFloor)
	checkAtLeast(p, "raft.election_timeout", r.ElectionTimeout, raftFloor)
	checkAtLeast(p, "raft.leader_lease_timeout", r.LeaderLeaseTimeout, raftFloor)
	checkAtLeast(p, "raft.commit_timeout", r.CommitTimeout, Duration(time.Millisecond))
	checkAtLeast(p, "raft.snapshot_interval", r.SnapshotInterval, raftFloor)
	if r.HeartbeatTimeout > r.ElectionTimeout {
		p.invalid("raft.heartbeat_timeout", "must be <= raft.election_timeout (%s, got %s)", r.ElectionTimeout, r.HeartbeatTimeout)
	}
	if r.LeaderLeaseTimeout > r.HeartbeatTimeout {
		p.invalid("raft.leader_lease_timeout", "must be <= raft.heartbeat_timeout (%s, got %s)", r.HeartbeatTimeout, r.LeaderLeaseTimeout)
	}
	if r.SnapshotThreshold == 0 {
		p.invalid("raft.snapshot_threshold", "must be > 0")
	}
}

// maxCheckpoint keeps a checkpoint well inside one raft entry and one
// snapshot record.
const maxCheckpoint = ByteSize(64 << 20)

// validate checks limits and every profile against them and the election
// timeout.
func (l Leases) validate(p *problems, election Duration) {
	checkPositive(p, "leases.min_ttl", l.MinTTL)
	if l.MaxTTL < l.MinTTL {
		p.invalid("leases.max_ttl", "must be >= leases.min_ttl (%s, got %s)", l.MinTTL, l.MaxTTL)
	}
	if l.Grace < 0 {
		p.invalid("leases.grace", "must be >= 0 (got %s)", l.Grace)
	}
	if l.CheckpointMaxBytes <= 0 || l.CheckpointMaxBytes > maxCheckpoint {
		p.invalid("leases.checkpoint_max_bytes", "must be between 1 and %s (got %s)", maxCheckpoint, l.CheckpointMaxBytes)
	}
	if l.Quota.Sessions < 0 || l.Quota.Tasks < 0 || l.Quota.Bytes < 0 || l.Quota.ClusterBytes < 0 {
		p.invalid("leases.quota", "sessions, tasks and bytes must be >= 0 (0: unlimited)")
	}
	if l.Quota.RequestsPerSecond < 0 || l.Quota.RequestBurst < 0 {
		p.invalid("leases.quota", "requests_per_second and request_burst must be >= 0 (0: unlimited)")
	}
	if (l.Quota.RequestsPerSecond == 0) != (l.Quota.RequestBurst == 0) {
		p.invalid("leases.quota", "requests_per_second and request_burst are unlimited together (both 0) or neither (got %d and %d)",
			l.Quota.RequestsPerSecond, l.Quota.RequestBurst)
	}
	if l.MaxTaskIDBytes < 1 || l.MaxTaskIDBytes > 4096 {
		p.invalid("leases.max_task_id_bytes", "must be between 1 and 4096 (got %d)", l.MaxTaskIDBytes)
	}
	if len(l.Profiles) == 0 {
		p.invalid("leases.profiles", "must define at least one profile")
	}
	names := make([]string, 0, len(l.Profiles))
	for name := range l.Profiles {
		names = append(names, name)
	}
	slices.Sort(names)
	if _, ok := l.Profiles[l.DefaultProfile]; !ok && len(names) > 0 {
		p.invalid("leases.default_profile", "must name a profile in leases.profiles (%s), got %q", quoteList(names), l.DefaultProfile)
	}
	minByElection := Duration(raftstore.MinTTL(election.Std()))
	for _, name := range names {
		prof := l.Profiles[name]
		key := "leases.profiles." + name
		if !validProfileName(name) {
			p.invalid(key, "profile names may only contain a-z, 0-9, '_' and '-' and must start with a letter or digit")
		}
		switch {
		case prof.TTL <= 0:
			p.invalid(key+".ttl", "must be > 0 (got %s)", prof.TTL)
		case prof.TTL < minByElection:
			p.invalid(key+".ttl", "must be >= 1.5 × raft.election_timeout (election_timeout %s → min %s, got %s)", election, ms(minByElection), prof.TTL)
		case prof.TTL < l.MinTTL:
			p.invalid(key+".ttl", "must be >= leases.min_ttl (%s, got %s)", l.MinTTL, prof.TTL)
		case prof.TTL > l.MaxTTL:
			p.invalid(key+".ttl", "must be <= leases.max_ttl (%s, got %s)", l.MaxTTL, prof.TTL)
		}
		switch {
		case prof.Heartbeat <= 0:
			p.invalid(key+".heartbeat", "must be > 0 (got %s)", prof.Heartbeat)
		case prof.TTL > 0 && prof.Heartbeat > Duration(raftstore.MaxHeartbeat(prof.TTL.Std())):
			p.invalid(key+".heartbeat", "must be <= ttl/3 (ttl %s → max %s, got %s)", prof.TTL, ms(Duration(raftstore.MaxHeartbeat(prof.TTL.Std()))), prof.Heartbeat)
		}
		if min := Duration(raftstore.MinProgressTimeout(raftstore.Profile{TTL: prof.TTL.Std()})); prof.ProgressTimeout < 0 ||
			(prof.ProgressTimeout > 0 && prof.ProgressTimeout < min) {
			p.invalid(key+".progress_timeout", "must be 0 (no progress deadline) or >= ttl (%s, got %s)", prof.TTL, prof.ProgressTimeout)
		}
	}
}

// validProfileName keeps profile names usable in environment variable names
// (FENCEPOST_LEASES_PROFILES_<NAME>_TTL), which are matched case-blind.
func validProfileName(s string) bool {
	if s == "" || len(s) > 64 || s[0] == '-' || s[0] == '_' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// CheckRuntime checks that data_dir is writable, both ports are free and the
// signing key file is readable.
func (s *Server) CheckRuntime() error {
	var p problems
	checkWritableDir(&p, "data_dir", s.DataDir)
	checkPortFree(&p, "http_addr", s.HTTPAddr)
	checkPortFree(&p, "raft_addr", s.RaftAddr)
	checkReadable(&p, "signing.key_file", s.Signing.KeyFile)
	s.TLS.checkRuntime(&p, "tls")
	return p.err()
}
