package scenario

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/proxy/cluster"
	"github.com/fencepost/fencepost/raftstore"
	"github.com/fencepost/fencepost/raftstore/httpapi"
)

// ClusterConfig configures an in-process lease cluster.
type ClusterConfig struct {
	// Nodes is the number of voters. Default 3.
	Nodes int
	// Dir holds one data directory per node. Required.
	Dir string
	// TTL is the lease TTL of the single profile, "scenario". Default 2s.
	TTL time.Duration
	// Heartbeat is the profile's heartbeat interval. Default TTL/4.
	Heartbeat time.Duration
	// Grace is how long a suspect_dead lease may be revived. Default TTL/2.
	Grace time.Duration
	// ElectionTimeout and HeartbeatTimeout are raft's. Defaults 300ms and
	// 100ms.
	ElectionTimeout  time.Duration
	HeartbeatTimeout time.Duration
	// SnapshotThreshold, SnapshotInterval and TrailingLogs are raft's
	// snapshot policy; zero keeps the store's defaults.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64
	// Logger receives the nodes' logs; nil discards them.
	Logger *zap.Logger
}

// ProfileName is the one task profile the scenario cluster knows.
const ProfileName = "scenario"

func (c ClusterConfig) withDefaults() ClusterConfig {
	if c.Nodes == 0 {
		c.Nodes = 3
	}
	if c.TTL == 0 {
		c.TTL = 2 * time.Second
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = c.TTL / 4
	}
	if c.Grace == 0 {
		c.Grace = c.TTL / 2
	}
	if c.ElectionTimeout == 0 {
		c.ElectionTimeout = 300 * time.Millisecond
	}
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = 100 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

// Node is one member of a Cluster: a raftstore.Store and its HTTP API.
// Store and API are nil while the node is stopped.
type Node struct {
	// ID is the raft server id ("n1", "n2", ...).
	ID string
	// Dir is the node's data directory (raft.db, snapshots).
	Dir string
	// RaftAddr and HTTPAddr are the node's raft and API addresses; they
	// stay the same across restarts.
	RaftAddr string
	HTTPAddr string
	// Store is the running store (nil while stopped).
	Store *raftstore.Store
	// API is the running HTTP API (nil while stopped).
	API *httpapi.Server
}

// Cluster is an in-process lease cluster on loopback, every node with its
// own data directory, raft port and HTTP port. Nodes can be stopped and
// restarted on the same addresses and data.
type Cluster struct {
	cfg ClusterConfig

	mu    sync.Mutex
	nodes []*Node
}

// StartCluster starts cfg.Nodes nodes: the first bootstraps, the others
// join through it. It returns once every node reports ready.
func StartCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	cfg = cfg.withDefaults()
	if cfg.Dir == "" {
		return nil, errors.New("scenario: ClusterConfig.Dir is required")
	}
	c := &Cluster{cfg: cfg}
	for i := 0; i < cfg.Nodes; i++ {
		n := &Node{ID: fmt.Sprintf("n%d", i+1), Dir: filepath.Join(cfg.Dir, fmt.Sprintf("n%d", i+1)), RaftAddr: "127.0.0.1:0"}
		addr, err := freeAddr()
		if err != nil {
			_ = c.Close()
			return nil, err
		}
		n.HTTPAddr = addr
		c.nodes = append(c.nodes, n)
		if err := c.open(n, i == 0); err != nil {
			_ = c.Close()
			return nil, err
		}
		if i == 0 {
			if _, err := c.WaitLeader(ctx); err != nil {
				_ = c.Close()
				return nil, err
			}
			continue
		}
		if err := c.join(ctx, n); err != nil {
			_ = c.Close()
			return nil, err
		}
	}
	if err := c.WaitReady(ctx); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// freeAddr returns a loopback address whose port was free a moment ago.
// The HTTP address must be known before the store opens, because it is
// replicated for followers to forward to.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

func (c *Cluster) open(n *Node, bootstrap bool) error {
	st, err := raftstore.Open(raftstore.Config{
		NodeID: n.ID, DataDir: n.Dir, RaftAddr: n.RaftAddr, HTTPAddr: n.HTTPAddr, Bootstrap: bootstrap,
		ElectionTimeout: c.cfg.ElectionTimeout, HeartbeatTimeout: c.cfg.HeartbeatTimeout,
		LeaderLeaseTimeout: c.cfg.HeartbeatTimeout,
		SnapshotThreshold:  c.cfg.SnapshotThreshold,
		SnapshotInterval:   c.cfg.SnapshotInterval,
		TrailingLogs:       c.cfg.TrailingLogs,
		Profiles:           map[string]raftstore.Profile{ProfileName: {TTL: c.cfg.TTL, Heartbeat: c.cfg.Heartbeat}},
		DefaultProfile:     ProfileName,
		Grace:              c.cfg.Grace,
		MinTTL:             min(c.cfg.TTL, time.Second),
		Logger:             c.cfg.Logger.With(zap.String("node", n.ID)),
	})
	if err != nil {
		return fmt.Errorf("scenario: open node %s: %w", n.ID, err)
	}
	srv, err := httpapi.New(httpapi.Config{Addr: n.HTTPAddr, Logger: c.cfg.Logger.With(zap.String("api", n.ID))}, st)
	if err == nil {
		err = srv.Start()
	}
	if err != nil {
		_ = st.Close()
		return fmt.Errorf("scenario: start API of node %s: %w", n.ID, err)
	}
	c.mu.Lock()
	n.RaftAddr = st.RaftAddr()
	n.Store, n.API = st, srv
	c.mu.Unlock()
	return nil
}

func (c *Cluster) join(ctx context.Context, n *Node) error {
	return poll(ctx, 20*time.Millisecond, func() (bool, error) {
		l := c.Leader()
		if l == nil {
			return false, nil
		}
		jctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		err := l.Store.Join(jctx, api.JoinRequest{ID: n.ID, RaftAddr: n.RaftAddr, HTTPAddr: n.HTTPAddr})
		return err == nil, nil
	})
}

// Nodes returns the members, running or not.
func (c *Cluster) Nodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Node(nil), c.nodes...)
}

// Endpoints returns every member's HTTP address.
func (c *Cluster) Endpoints() []string {
	var out []string
	for _, n := range c.Nodes() {
		out = append(out, n.HTTPAddr)
	}
	return out
}

// Leader returns the running node that is leader, or nil.
func (c *Cluster) Leader() *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		if n.Store != nil && n.Store.IsLeader() {
			return n
		}
	}
	return nil
}

// WaitLeader waits until some running node leads and is ready to serve.
func (c *Cluster) WaitLeader(ctx context.Context) (*Node, error) {
	var leader *Node
	err := poll(ctx, 10*time.Millisecond, func() (bool, error) {
		leader = c.Leader()
		return leader != nil && leader.Store.Ready() == nil, nil
	})
	return leader, err
}

// WaitReady waits until every running node is ready.
func (c *Cluster) WaitReady(ctx context.Context) error {
	return poll(ctx, 10*time.Millisecond, func() (bool, error) {
		for _, n := range c.Nodes() {
			c.mu.Lock()
			st := n.Store
			c.mu.Unlock()
			if st != nil && st.Ready() != nil {
				return false, nil
			}
		}
		return true, nil
	})
}

// StopNode stops a node (API first, then the store), keeping its data
// and addresses for RestartNode.
func (c *Cluster) StopNode(n *Node) error {
	c.mu.Lock()
	st, srv := n.Store, n.API
	n.Store, n.API = nil, nil
	c.mu.Unlock()
	var errs []error
	if srv != nil {
		errs = append(errs, srv.Close())
	}
	if st != nil {
		errs = append(errs, st.Close())
	}
	return errors.Join(errs...)
}

// RestartNode starts a stopped node again on its data directory and
// addresses.
func (c *Cluster) RestartNode(n *Node) error {
	c.mu.Lock()
	running := n.Store != nil
	c.mu.Unlock()
	if running {
		return fmt.Errorf("scenario: node %s is running", n.ID)
	}
	return c.open(n, false)
}

// Close stops every node.
func (c *Cluster) Close() error {
	var errs []error
	for _, n := range c.Nodes() {
		errs = append(errs, c.StopNode(n))
	}
	return errors.Join(errs...)
}

// poll calls cond every interval until it reports done, returns an error,
// or ctx ends.
func poll(ctx context.Context, interval time.Duration, cond func() (bool, error)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// NewClusterClient returns the cluster's Go client (proxy/cluster) for
// endpoints, each attempt bounded by timeout. It panics on an invalid
// configuration (no endpoints), which is a bug in the calling test.
func NewClusterClient(endpoints []string, timeout time.Duration) *cluster.Client {
	c, err := cluster.New(cluster.Config{Endpoints: endpoints, Timeout: timeout})
	if err != nil {
		panic(err)
	}
	return c
}
