package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdNode is one etcd member process and how to restart it.
type etcdNode struct {
	name      string
	clientURL string
	peerURL   string
	dir       string
	args      []string
	proc      *proc
}

// etcdCluster is a 3-member etcd cluster on loopback. Durability is etcd's
// default: the WAL is fsynced before a write is acknowledged.
type etcdCluster struct {
	bin       string
	label     string
	heartbeat time.Duration
	election  time.Duration
	nodes     []*etcdNode
}

// startEtcdCluster starts three members with the given raft heartbeat
// interval and election timeout, then waits for a leader.
func startEtcdCluster(bin, dir, label string, ps *ports, heartbeat, election time.Duration) (*etcdCluster, error) {
	c := &etcdCluster{bin: bin, label: label, heartbeat: heartbeat, election: election}
	var initial []string
	for i := 1; i <= 3; i++ {
		n := &etcdNode{
			name:      fmt.Sprintf("e%d", i),
			clientURL: fmt.Sprintf("%s127.0.0.1:%d", scheme(), ps.next()),
			peerURL:   fmt.Sprintf("%s127.0.0.1:%d", scheme(), ps.next()),
			dir:       filepath.Join(dir, fmt.Sprintf("e%d", i)),
		}
		initial = append(initial, n.name+"="+n.peerURL)
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		if err := os.MkdirAll(n.dir, 0o755); err != nil {
			return nil, err
		}
		n.args = []string{
			"--name", n.name,
			"--data-dir", filepath.Join(n.dir, "data"),
			"--listen-client-urls", n.clientURL,
			"--advertise-client-urls", n.clientURL,
			"--listen-peer-urls", n.peerURL,
			"--initial-advertise-peer-urls", n.peerURL,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new",
			"--initial-cluster-token", "bench-" + label,
			"--heartbeat-interval", fmt.Sprint(heartbeat.Milliseconds()),
			"--election-timeout", fmt.Sprint(election.Milliseconds()),
			"--logger", "zap",
			"--log-level", "warn",
			// Workload 6 forces a collection through /debug/pprof/heap?gc=1
			// before it reads the live heap, on both systems alike.
			"--enable-pprof",
		}
		if sec != nil {
			n.args = append(n.args, sec.etcdFlags()...)
		}
		if err := c.startNode(n); err != nil {
			c.stop()
			return nil, err
		}
	}
	if _, err := c.waitLeader(20 * time.Second); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// startNode starts (or restarts) member n and waits for its client port.
func (c *etcdCluster) startNode(n *etcdNode) error {
	p, err := startProc(n.name, filepath.Join(n.dir, "etcd.log"), c.bin, n.args...)
	if err != nil {
		return err
	}
	n.proc = p
	return waitFor(15*time.Second, n.name+" client port", func() error {
		if p.exited() {
			return fmt.Errorf("exited: %s", p.tail(800))
		}
		return tcpUp(hostPort(n.clientURL))
	})
}

// newEtcdClient connects to the given client URLs. Its own logging is off.
// In the TLS pass it presents the harness's client certificate.
func newEtcdClient(endpoints ...string) (*clientv3.Client, error) {
	var tc *tls.Config
	if sec != nil {
		tc = sec.etcdClient
	}
	return clientv3.New(clientv3.Config{
		TLS:                  tc,
		Endpoints:            endpoints,
		DialTimeout:          2 * time.Second,
		Logger:               zap.NewNop(),
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
	})
}

// leader returns the index of the member that reports itself leader.
func (c *etcdCluster) leader() (int, error) {
	for i, n := range c.nodes {
		if n.proc == nil || n.proc.exited() {
			continue
		}
		cli, err := newEtcdClient(n.clientURL)
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := cli.Status(ctx, n.clientURL)
		cancel()
		cli.Close()
		if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
			return i, nil
		}
	}
	return -1, errors.New("no etcd member reports itself leader")
}

// waitLeader waits until some member is leader.
func (c *etcdCluster) waitLeader(d time.Duration) (int, error) {
	idx := -1
	err := waitFor(d, "etcd leader", func() error {
		var err error
		idx, err = c.leader()
		return err
	})
	return idx, err
}

// waitHealthy waits until every member answers a linearizable read.
func (c *etcdCluster) waitHealthy(d time.Duration) error {
	return waitFor(d, "etcd health", func() error {
		for _, n := range c.nodes {
			cli, err := newEtcdClient(n.clientURL)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err = cli.Get(ctx, "health")
			cancel()
			cli.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", n.name, err)
			}
		}
		return nil
	})
}

// leaderURL returns the leader's client URL.
func (c *etcdCluster) leaderURL() (string, error) {
	i, err := c.waitLeader(10 * time.Second)
	if err != nil {
		return "", err
	}
	return c.nodes[i].clientURL, nil
}

// name reports the cluster's label in tables.
func (c *etcdCluster) name() string { return c.label }

// kill SIGKILLs member i.
func (c *etcdCluster) kill(i int) { c.nodes[i].proc.kill() }

// restart starts member i again on its old data dir and waits until every
// member serves reads.
func (c *etcdCluster) restart(i int) error {
	if err := c.startNode(c.nodes[i]); err != nil {
		return err
	}
	return c.waitHealthy(20 * time.Second)
}

// endpoints lists every member's client URL.
func (c *etcdCluster) endpoints() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.clientURL)
	}
	return out
}

// pid returns member i's PID.
func (c *etcdCluster) pid(i int) int { return c.nodes[i].proc.pid() }

// procs lists every member's process (nil before it started).
func (c *etcdCluster) procs() procSet {
	out := make(procSet, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.proc
	}
	return out
}

// stop terminates every member by PID.
func (c *etcdCluster) stop() { c.procs().stop() }

// pids lists the PIDs of the running members.
func (c *etcdCluster) pids() []int { return c.procs().pids() }
