package raftstore

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
)

// Test timings: short raft timeouts and a 1s lease TTL keep a failover
// well under a second. The raft heartbeat is 150ms rather than 50ms
// because the test machine is shared (load average ~10 on 2 cores, with
// -race): at 50ms a leader regularly missed its quorum contact and
// stepped down in the middle of unrelated tests.
const (
	testRaftHeartbeat = 150 * time.Millisecond
	testTTL           = time.Second
	testHeartbeat     = 300 * time.Millisecond
	testGrace         = 300 * time.Millisecond
	waitTimeout       = 10 * time.Second
)

func testConfig(t testing.TB, id string) Config {
	return Config{
		NodeID:             id,
		DataDir:            t.TempDir(),
		RaftAddr:           "127.0.0.1:0",
		HTTPAddr:           "http-" + id,
		HeartbeatTimeout:   testRaftHeartbeat,
		ElectionTimeout:    2 * testRaftHeartbeat,
		LeaderLeaseTimeout: testRaftHeartbeat,
		CommitTimeout:      5 * time.Millisecond,
		SnapshotInterval:   time.Hour,
		SnapshotThreshold:  1 << 20,
		Profiles: map[string]Profile{
			"test": {TTL: testTTL, Heartbeat: testHeartbeat},
			"mid":  {TTL: 3 * time.Second, Heartbeat: time.Second},
			"long": {TTL: 30 * time.Second, Heartbeat: 5 * time.Second},
		},
		DefaultProfile: "test",
		Grace:          testGrace,
		MinTTL:         100 * time.Millisecond,
		ApplyTimeout:   3 * time.Second,
		Logger:         testLogger(t),
		SigningKey:     testSigningKey,
	}
}

// testSigningKey is every test node's signing key (members share one).
var testSigningKey = ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))

func testLogger(t testing.TB) *zap.Logger {
	return zaptest.NewLogger(t, zaptest.Level(testLogLevel()))
}

// partTransport wraps a raft transport so a test can cut a node off:
// while partitioned, outgoing RPCs fail and incoming ones are answered
// with an error, in both the normal and the heartbeat fast path.
type partTransport struct {
	raft.Transport
	cut      atomic.Bool
	consumer chan raft.RPC
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
}

var errPartitioned = errors.New("test: partitioned")

func newPartTransport(inner raft.Transport) *partTransport {
	p := &partTransport{Transport: inner, consumer: make(chan raft.RPC), stop: make(chan struct{}), done: make(chan struct{})}
	go p.pump()
	return p
}

func (p *partTransport) pump() {
	defer close(p.done)
	in := p.Transport.Consumer()
	for {
		select {
		case <-p.stop:
			return
		case rpc := <-in:
			if p.cut.Load() {
				rpc.Respond(nil, errPartitioned)
				continue
			}
			select {
			case p.consumer <- rpc:
			case <-p.stop:
				rpc.Respond(nil, errPartitioned)
				return
			}
		}
	}
}

func (p *partTransport) Consumer() <-chan raft.RPC { return p.consumer }

func (p *partTransport) SetHeartbeatHandler(cb func(raft.RPC)) {
	if cb == nil {
		p.Transport.SetHeartbeatHandler(nil)
		return
	}
	p.Transport.SetHeartbeatHandler(func(rpc raft.RPC) {
		if p.cut.Load() {
			rpc.Respond(nil, errPartitioned)
			return
		}
		cb(rpc)
	})
}

func (p *partTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, a *raft.AppendEntriesRequest, r *raft.AppendEntriesResponse) error {
	if p.cut.Load() {
		return errPartitioned
	}
	return p.Transport.AppendEntries(id, target, a, r)
}

func (p *partTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, a *raft.RequestVoteRequest, r *raft.RequestVoteResponse) error {
	if p.cut.Load() {
		return errPartitioned
	}
	return p.Transport.RequestVote(id, target, a, r)
}

func (p *partTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, a *raft.RequestPreVoteRequest, r *raft.RequestPreVoteResponse) error {
	if p.cut.Load() {
		return errPartitioned
	}
	return p.Transport.(raft.WithPreVote).RequestPreVote(id, target, a, r)
}

func (p *partTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, a *raft.InstallSnapshotRequest, r *raft.InstallSnapshotResponse, data io.Reader) error {
	if p.cut.Load() {
		return errPartitioned
	}
	return p.Transport.InstallSnapshot(id, target, a, r, data)
}

func (p *partTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, a *raft.TimeoutNowRequest, r *raft.TimeoutNowResponse) error {
	if p.cut.Load() {
		return errPartitioned
	}
	return p.Transport.TimeoutNow(id, target, a, r)
}

func (p *partTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	if p.cut.Load() {
		return nil, errPartitioned
	}
	pl, err := p.Transport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return &partPipeline{AppendPipeline: pl, p: p}, nil
}

func (p *partTransport) Close() error {
	p.once.Do(func() { close(p.stop) })
	<-p.done
	if c, ok := p.Transport.(raft.WithClose); ok {
		return c.Close()
	}
	return nil
}

type partPipeline struct {
	raft.AppendPipeline
	p *partTransport
}

func (pp *partPipeline) AppendEntries(a *raft.AppendEntriesRequest, r *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	if pp.p.cut.Load() {
		return nil, errPartitioned
	}
	return pp.AppendPipeline.AppendEntries(a, r)
}

// testCluster is an in-process cluster on real TCP (127.0.0.1:0).
type testCluster struct {
	t     testing.TB
	mu    sync.Mutex // guards nodes: clients run while nodes stop
	cfgs  []Config
	nodes []*Store // nil while a node is down
	parts []*partTransport
}

// newTestCluster starts n nodes: the first bootstraps, the others join
// through the leader. Everything is closed at the end of the test.
func newTestCluster(t testing.TB, n int, mod ...func(*Config)) *testCluster {
	t.Helper()
	c := &testCluster{t: t, cfgs: make([]Config, n), nodes: make([]*Store, n), parts: make([]*partTransport, n)}
	t.Cleanup(c.closeAll)
	for i := range n {
		cfg := testConfig(t, fmt.Sprintf("n%d", i))
		cfg.Bootstrap = i == 0
		for _, m := range mod {
			m(&cfg)
		}
		c.cfgs[i] = cfg
		c.start(i)
		if i == 0 {
			c.waitForLeader()
			continue
		}
		join := api.JoinRequest{ID: cfg.NodeID, RaftAddr: c.node(i).RaftAddr(), HTTPAddr: cfg.HTTPAddr}
		_, err := retryLeader(c, func(s *Store) (struct{}, error) { return struct{}{}, s.Join(ctxT(t), join) })
		require.NoError(t, err)
	}
	c.waitConverged()
	return c
}

func (c *testCluster) start(i int) {
	c.t.Helper()
	cfg := c.cfgs[i]
	cfg.transportWrap = func(tr raft.Transport) raft.Transport {
		p := newPartTransport(tr)
		c.mu.Lock()
		c.parts[i] = p
		c.mu.Unlock()
		return p
	}
	s, err := Open(cfg)
	require.NoError(c.t, err)
	c.mu.Lock()
	c.nodes[i] = s
	c.mu.Unlock()
	// A restart must come back on the same raft address (the bound one:
	// the advertised address may be a name).
	c.cfgs[i].RaftAddr = s.layer.ln.Addr().String()
}

func (c *testCluster) stop(i int) {
	c.t.Helper()
	c.mu.Lock()
	s := c.nodes[i]
	c.nodes[i] = nil
	c.mu.Unlock()
	if s != nil {
		require.NoError(c.t, s.Close())
	}
}

// snapshot returns the node slice as of now (nil entries are down).
func (c *testCluster) snapshot() []*Store {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Store(nil), c.nodes...)
}

// isCut reports whether node i is partitioned.
func (c *testCluster) isCut(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.parts[i] != nil && c.parts[i].cut.Load()
}

// partition cuts node i off from the others (or heals it).
func (c *testCluster) partition(i int, cut bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.parts[i].cut.Store(cut)
}

// node returns node i (nil while down).
func (c *testCluster) node(i int) *Store { return c.snapshot()[i] }

func (c *testCluster) closeAll() {
	for i, s := range c.snapshot() {
		if s != nil {
			_ = s.Close()
			c.mu.Lock()
			c.nodes[i] = nil
			c.mu.Unlock()
		}
	}
}

func (c *testCluster) index(s *Store) int {
	for i, n := range c.snapshot() {
		if n == s {
			return i
		}
	}
	c.t.Fatalf("store not in cluster")
	return -1
}

// live returns the running nodes.
func (c *testCluster) live() []*Store {
	var out []*Store
	for _, s := range c.snapshot() {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

func inOffice(s *Store) bool {
	s.leadMu.Lock()
	defer s.leadMu.Unlock()
	return s.leading && s.IsLeader()
}

// waitFor polls cond every few milliseconds until it holds or the
// deadline passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitForLeader returns the one running, unpartitioned node that leads and
// has taken office.
func (c *testCluster) waitForLeader() *Store {
	c.t.Helper()
	var leader *Store
	waitFor(c.t, waitTimeout, "a leader in office", func() bool {
		leader = nil
		for i, s := range c.snapshot() {
			if s != nil && !c.isCut(i) && inOffice(s) {
				leader = s
				return true
			}
		}
		return false
	})
	return leader
}

// waitForNewLeader waits for a leader other than old.
func (c *testCluster) waitForNewLeader(old *Store) *Store {
	c.t.Helper()
	var leader *Store
	waitFor(c.t, waitTimeout, "a new leader in office", func() bool {
		leader = nil
		for i, s := range c.snapshot() {
			if s != nil && s != old && !c.isCut(i) && inOffice(s) {
				leader = s
				return true
			}
		}
		return false
	})
	return leader
}

// waitConverged waits until every running node applied the same index
// and (then) holds the same state hash.
func (c *testCluster) waitConverged() {
	c.t.Helper()
	waitFor(c.t, waitTimeout, "replicas to apply the same index", func() bool {
		live := c.live()
		if len(live) == 0 {
			return true
		}
		want := live[0].raft.CommitIndex()
		for _, s := range live {
			if s.raft.CommitIndex() != want || s.AppliedIndex() < want || s.raft.AppliedIndex() != want {
				return false
			}
		}
		return true
	})
}

func (c *testCluster) requireSameHash() {
	c.t.Helper()
	live := c.live()
	want := live[0].StateHash()
	for _, s := range live[1:] {
		require.Equal(c.t, want, s.StateHash(), "replica %s diverged", s.NodeID())
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// retryLeader runs fn against the current leader until it returns
// something other than a not-leader / no-leader / timeout / shutdown
// error, as the HTTP layer plus the client would. The same request id is
// reused on every attempt.
func retryLeader[T any](c *testCluster, fn func(s *Store) (T, error)) (T, error) {
	c.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		var (
			v   T
			err error
		)
		s := c.anyLeader()
		if s == nil {
			err = ErrNoLeader
		} else {
			v, err = fn(s)
		}
		if !retryable(err) || time.Now().After(deadline) {
			return v, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func retryable(err error) bool {
	return errors.Is(err, ErrNotLeader) || errors.Is(err, ErrNoLeader) || errors.Is(err, ErrTimeout) || errors.Is(err, ErrShutdown)
}

// anyLeader returns a running node that believes it leads, or nil.
func (c *testCluster) anyLeader() *Store {
	for i, s := range c.snapshot() {
		if s != nil && !c.isCut(i) && s.IsLeader() {
			return s
		}
	}
	return nil
}

// testLogLevel is Error unless RAFTSTORE_TEST_LOG names another level.
func testLogLevel() zapcore.Level {
	if lv, err := zapcore.ParseLevel(os.Getenv("RAFTSTORE_TEST_LOG")); err == nil && os.Getenv("RAFTSTORE_TEST_LOG") != "" {
		return lv
	}
	return zapcore.ErrorLevel
}

// openSession opens a session for worker through whichever node leads.
func (c *testCluster) openSession(worker string) string {
	c.t.Helper()
	sess, err := retryLeader(c, func(s *Store) (api.Session, error) {
		return s.OpenSession(ctxT(c.t), "open-"+worker, api.OpenSessionRequest{WorkerID: worker})
	})
	require.NoError(c.t, err)
	return sess.SessionID
}

// acquire grants task (created with profile) to session through the leader.
func (c *testCluster) acquire(rid, task, session, profile string) api.Grant {
	c.t.Helper()
	g, err := retryLeader(c, func(s *Store) (api.Grant, error) {
		return s.Acquire(ctxT(c.t), rid, task, api.AcquireRequest{SessionID: session, Create: true, Profile: profile})
	})
	require.NoError(c.t, err)
	return g
}

// task reads a task linearizably through the leader.
func (c *testCluster) task(id string) *lease.Task {
	c.t.Helper()
	tk, err := retryLeader(c, func(s *Store) (*lease.Task, error) { return s.Task(ctxT(c.t), id, false) })
	require.NoError(c.t, err)
	return tk
}
