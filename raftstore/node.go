package raftstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence/fenceotel"
	"github.com/fencepost/fencepost/fence/lease"
)

// Open starts a node: it opens (or creates) the data dir, starts raft,
// bootstraps a one-node cluster when cfg.Bootstrap is set and there is no
// existing state, and starts the leadership watcher.
func Open(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	s := &Store{
		cfg: cfg, cmds: NewCommands(cfg), log: cfg.Logger.With(zap.String("node", cfg.NodeID)), clock: cfg.Clock,
		leadReady: make(chan struct{}), closing: make(chan struct{}), haltDone: make(chan struct{}),
	}
	s.hclog = newHCLog(s.log.Named("raft"))
	s.fsm = newFSM(s.log)
	s.fsm.version, s.fsm.halt.onHalt, s.stamp = cfg.Version, s.onHalt, entryStamp(cfg.Version)
	s.lessor = newLessor(cfg.Clock, cfg.Grace, cfg.SessionIdle, profileStallLimits(cfg.Profiles))
	if err := s.openRaft(); err != nil {
		s.closeStorage()
		return nil, err
	}
	s.m = newMetrics(s)
	if cfg.Registerer != nil {
		if err := s.m.register(cfg.Registerer); err != nil {
			_ = s.raft.Shutdown().Error()
			s.closeStorage()
			return nil, err
		}
	}
	s.verify = newVerifier(s.raft)
	s.wg.Add(3)
	go func() { defer s.wg.Done(); s.verify.run(s.closing) }()
	go func() { defer s.wg.Done(); s.watchLeadership() }()
	go func() { defer s.wg.Done(); s.watchPeers() }()
	return s, nil
}

func (s *Store) openRaft() error {
	cfg := s.cfg
	snapDir := filepath.Join(cfg.DataDir, "snapshots")
	if err := os.MkdirAll(snapDir, 0o750); err != nil {
		return fmt.Errorf("raftstore: create data dir: %w", err)
	}
	// One process per data dir (the WAL's own bolt meta file would wait
	// for its lock forever). The log store and why it is a WAL: logstore.go.
	lock, err := lockDataDir(cfg.DataDir, boltOpenTimeout)
	if err != nil {
		return fmt.Errorf("raftstore: open log store: %w", err)
	}
	s.lock = lock
	logStore, err := openLogStore(cfg.DataDir, s.hclog)
	if err != nil {
		return fmt.Errorf("raftstore: open log store: %w", err)
	}
	s.logs = logStore
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, 2, s.hclog.Named("snapshot"))
	if err != nil {
		return fmt.Errorf("raftstore: open snapshot store: %w", err)
	}
	layer, err := newStreamLayer(cfg.RaftAddr, cfg.RaftAdvertise, cfg.TLS, s.memberAt, s.peerAllowed, cfg.Dial, s.log.Named("transport"))
	if err != nil {
		return fmt.Errorf("raftstore: raft transport on %s: %w", cfg.RaftAddr, err)
	}
	if h, _, err := net.SplitHostPort(layer.Addr().String()); err != nil || net.ParseIP(h) != nil && net.ParseIP(h).IsUnspecified() {
		_ = layer.Close()
		return fmt.Errorf("%w: RaftAdvertise must be set when RaftAddr %q is a wildcard", ErrConfig, cfg.RaftAddr)
	}
	s.layer = layer
	if cfg.TLS == nil {
		s.log.Warn("raft transport is PLAINTEXT: any peer that reaches the raft port can join the log; for loopback development only",
			zap.String("raftAddr", cfg.RaftAddr))
	}
	nt := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: layer, MaxPool: 3, Timeout: 10 * time.Second, Logger: s.hclog.Named("transport"),
	})
	s.trans, s.net = nt, nt
	if cfg.transportWrap != nil {
		s.trans = cfg.transportWrap(nt)
	}

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.TrailingLogs = cfg.TrailingLogs
	// Throughput: the leader loop drains every proposal waiting on applyCh
	// into one batch (one AppendEntries, one fsync), up to MaxAppendEntries.
	// BatchApplyCh stays off: it buffers applyCh, and a future sitting in
	// that buffer when raft shuts down is never answered, so its caller
	// would block forever (seen in the leader-kill test). Unbuffered, every
	// accepted proposal is owned by the leader loop, which answers it.
	rc.MaxAppendEntries = 512
	rc.BatchApplyCh = false
	rc.Logger = s.hclog

	// The leader replicates from its log store; without a cache every
	// AppendEntries re-reads (and msgpack-decodes) from bolt the entries it
	// has just written, about a tenth of the leader's CPU per acquire. The
	// cache holds entries only once bolt has stored them, so what it serves
	// is durable.
	logs, err := raft.NewLogCache(logCacheEntries, logStore)
	if err != nil {
		closeTransport(s.trans)
		return fmt.Errorf("raftstore: log cache: %w", err)
	}
	existing, err := raft.HasExistingState(logs, logStore, snaps)
	if err != nil {
		closeTransport(s.trans)
		return fmt.Errorf("raftstore: inspect raft state: %w", err)
	}
	if cfg.Restore.File != "" && existing && alreadyRestored(cfg.DataDir, cfg.Restore.File) {
		s.log.Info("data dir was restored from this backup already; starting from the data dir", zap.String("file", cfg.Restore.File))
	} else if cfg.Restore.File != "" {
		if existing {
			closeTransport(s.trans)
			return fmt.Errorf("%w: Restore: data dir %s already holds raft state; a restore starts a new cluster in an empty data dir", ErrConfig, cfg.DataDir)
		}
		if err := s.restoreInto(snaps, s.trans.LocalAddr()); err != nil {
			closeTransport(s.trans)
			return err
		}
		existing = true // the restored snapshot is the state; nothing to bootstrap
	}
	r, err := raft.NewRaft(rc, s.fsm, logs, logStore, snaps, s.trans)
	if err != nil {
		closeTransport(s.trans)
		return fmt.Errorf("raftstore: start raft: %w", err)
	}
	s.raft = r
	s.raftRef.Store(r)
	if s.fsm.halt.halted() != nil {
		_ = r.Shutdown() // halted before raftRef was set (onHalt)
	}
	if cfg.Bootstrap && !existing {
		boot := raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter, ID: rc.LocalID, Address: s.trans.LocalAddr(),
		}}}
		if err := r.BootstrapCluster(boot).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			_ = r.Shutdown().Error()
			return fmt.Errorf("raftstore: bootstrap: %w", err)
		}
	}
	s.log.Info("raft started", zap.String("raftAddr", string(s.trans.LocalAddr())),
		zap.Bool("existingState", existing), zap.Bool("bootstrap", cfg.Bootstrap && !existing))
	return nil
}

// memberAt returns the id of the member configured at a raft address, ""
// when none is (a joining node the leader has not recorded yet; the
// transport then accepts any member certificate, and Join has already
// checked that one answers for the id).
func (s *Store) memberAt(addr string) string {
	r := s.raftRef.Load()
	if r == nil {
		return ""
	}
	f := r.GetConfiguration()
	if f.Error() != nil {
		return ""
	}
	for _, srv := range f.Configuration().Servers {
		if string(srv.Address) == addr {
			return string(srv.ID)
		}
	}
	return ""
}

// boltOpenTimeout bounds the wait for the data dir's lock, so a second
// process on the same data directory fails instead of hanging.
const boltOpenTimeout = 5 * time.Second

// logCacheEntries is the size of the leader's in-memory cache of recent
// log entries: two of the largest AppendEntries batches (MaxAppendEntries),
// so a follower a batch behind is still served from memory.
const logCacheEntries = 1024

func closeTransport(t raft.Transport) {
	if c, ok := t.(raft.WithClose); ok {
		_ = c.Close()
	}
}

func (s *Store) closeStorage() {
	if s.logs != nil {
		_ = s.logs.Close()
	}
	s.lock.release()
}

// Close stops the node: the leader loop and the verifier first, then raft
// (which closes the transport), then the log store. Safe to call twice.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.wg.Wait()
		if s.fsm.halt.halted() != nil {
			<-s.haltDone
		} else {
			s.drainProposals()
		}
		if err := s.raft.Shutdown().Error(); err != nil {
			s.closeErr = fmt.Errorf("raftstore: raft shutdown: %w", err)
		}
		s.net.CloseStreams()
		s.layer.wait()
		if err := s.logs.Close(); err != nil && s.closeErr == nil {
			s.closeErr = fmt.Errorf("raftstore: close log store: %w", err)
		}
		s.lock.release()
		if s.cfg.Registerer != nil {
			s.m.unregister(s.cfg.Registerer)
		}
		s.log.Info("store closed")
	})
	return s.closeErr
}

// RaftAddr returns the address raft listens on (useful with port 0).
func (s *Store) RaftAddr() string { return string(s.trans.LocalAddr()) }

// RaftListenAddr returns the address the raft listener is bound to (with
// the real port when the configured one was 0), which may differ from the
// advertised RaftAddr.
func (s *Store) RaftListenAddr() string { return s.layer.ln.Addr().String() }

// NodeID returns this node's id.
func (s *Store) NodeID() string { return s.cfg.NodeID }

// applyEntry proposes one log entry and waits for it to be applied here.
func (s *Store) applyEntry(ctx context.Context, t entryType, body any) (any, error) {
	if s.raft.State() != raft.Leader {
		return nil, ErrNotLeader
	}
	data, err := encodeEntry(t, body)
	if err != nil {
		return nil, err
	}
	timeout := s.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
		if timeout <= 0 {
			return nil, fmt.Errorf("%w: deadline passed before proposing", ErrTimeout)
		}
	}
	start := time.Now()
	s.proposeGate.RLock()
	if err := s.proposable(); err != nil {
		s.proposeGate.RUnlock()
		return nil, err
	}
	s.awaiting.Add(1)
	f := s.raft.ApplyLog(raft.Log{Data: data, Extensions: s.stamp}, timeout)
	s.proposeGate.RUnlock()
	err = f.Error()
	s.awaiting.Add(-1)
	took := time.Since(start)
	if s.m != nil {
		s.m.proposalLatency.Observe(took.Seconds())
	}
	// A traced API request records how long its entry took to commit.
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(fenceotel.RaftApply.Float64(float64(took.Microseconds()) / 1000))
	}
	if err != nil {
		return nil, mapRaftError(err)
	}
	if h, ok := f.Response().(*HaltError); ok {
		return nil, h
	}
	return f.Response(), nil
}

// propose stamps cmd with the leader's time, commits it and returns the
// model's result. A model error is returned inside the Result, not as err.
func (s *Store) propose(ctx context.Context, cmd *lease.Command) (lease.Result, error) {
	if cmd.Time.IsZero() {
		cmd.Time = s.clock.Now()
	}
	resp, err := s.applyEntry(ctx, entryCommand, cmd)
	if err != nil {
		return lease.Result{}, err
	}
	res, ok := resp.(lease.Result)
	if !ok {
		return lease.Result{}, fmt.Errorf("raftstore: unexpected apply response %T", resp)
	}
	if res.Err != nil && s.m != nil {
		s.m.applyErrors.WithLabelValues(cmd.Op.String(), lease.ErrorCode(res.Err)).Inc()
	}
	return res, nil
}

// mapRaftError turns raft's errors into the store's sentinels.
func mapRaftError(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return fmt.Errorf("%w: %v", ErrNotLeader, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w: %v", ErrShutdown, err)
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrEnqueueTimeout),
		errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, raft.ErrAbortedByRestore):
		return fmt.Errorf("%w: %v", ErrTimeout, err)
	}
	return fmt.Errorf("%w: %v", ErrTimeout, err)
}
