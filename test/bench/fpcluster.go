package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// benchProfile is the lease profile the harness adds to the cluster: a TTL
// of ten minutes (the cluster's max_ttl), so that no lease made by one
// workload expires and turns into reclaim traffic during a later one. The
// etcd side grants leases with the same TTL.
const (
	benchProfile = "bench"
	benchTTL     = 600 // seconds
)

// fpNode is one fencepost server process and how to restart it.
type fpNode struct {
	id       string
	httpAddr string
	raftAddr string
	dir      string
	config   string
	proc     *proc
}

// fpCluster is a 3-node fencepost lease cluster on loopback.
type fpCluster struct {
	bin   string
	nodes []*fpNode
}

// fpServerConfig renders node n's YAML config. Raft and durability settings
// are the product's defaults; only the addresses, the log level, pprof and
// the bench profile are set.
func fpServerConfig(n *fpNode, bootstrap bool, join []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "node_id: %s\ndata_dir: %s\nhttp_addr: %s\nraft_addr: %s\nbootstrap: %v\n",
		n.id, filepath.Join(n.dir, "data"), n.httpAddr, n.raftAddr, bootstrap)
	if len(join) > 0 {
		fmt.Fprintf(&b, "join: [%s]\n", strings.Join(join, ", "))
	}
	// pprof costs nothing until asked; workload 6 uses it to force a
	// collection before reading the live heap, and --profile for CPU.
	b.WriteString("pprof: true\n")
	fmt.Fprintf(&b, "log:\n  level: warn\nleases:\n  profiles:\n    %s:\n      ttl: %ds\n      heartbeat: %ds\n",
		benchProfile, benchTTL, benchTTL/3)
	// The load generator is one sidecar identity standing in for a fleet
	// (the heartbeat workload holds 1000 sessions, the lease workload makes
	// thousands of calls a second), so the per-identity quota and request
	// rate are lifted; they apply only with TLS, where callers have one.
	b.WriteString("  quota:\n    sessions: 0\n    tasks: 0\n    bytes: 0\n    cluster_bytes: 0\n    requests_per_second: 0\n    request_burst: 0\n")
	if sec != nil {
		b.WriteString(sec.fpConfig(n.id))
	}
	return b.String()
}

// startFPCluster starts three nodes: the first bootstraps, the other two
// join through it. It returns once every node reports the same leader.
func startFPCluster(bin, dir string, ps *ports) (*fpCluster, error) {
	c := &fpCluster{bin: bin}
	for i := 1; i <= 3; i++ {
		n := &fpNode{
			id:       fmt.Sprintf("fp%d", i),
			httpAddr: fmt.Sprintf("127.0.0.1:%d", ps.next()),
			raftAddr: fmt.Sprintf("127.0.0.1:%d", ps.next()),
			dir:      filepath.Join(dir, fmt.Sprintf("fp%d", i)),
		}
		if err := os.MkdirAll(n.dir, 0o755); err != nil {
			return nil, err
		}
		var join []string
		if i > 1 {
			join = []string{c.nodes[0].httpAddr}
		}
		n.config = filepath.Join(n.dir, "server.yaml")
		if err := os.WriteFile(n.config, []byte(fpServerConfig(n, i == 1, join)), 0o644); err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, n)
		if err := c.startNode(n); err != nil {
			c.stop()
			return nil, err
		}
		if i == 1 {
			if _, err := c.waitLeader(15 * time.Second); err != nil {
				c.stop()
				return nil, err
			}
		}
	}
	if err := c.waitMembers(3, 20*time.Second); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// startNode starts (or restarts) node n from its config file and waits
// for its HTTP port.
func (c *fpCluster) startNode(n *fpNode) error {
	p, err := startProc(n.id, filepath.Join(n.dir, "server.log"), c.bin, "server", "--config", n.config)
	if err != nil {
		return err
	}
	n.proc = p
	prof.register(p.pid(), n.id, n.httpAddr)
	err = waitFor(15*time.Second, n.id+" http", func() error {
		if p.exited() {
			return fmt.Errorf("exited: %s", p.tail(800))
		}
		return tcpUp(n.httpAddr)
	})
	return err
}

// status asks node n for the cluster status.
func (c *fpCluster) status(n *fpNode) (fpClusterStatus, error) {
	cl := newFPClient(n.httpAddr, 1, time.Second)
	if sec != nil {
		cl.hc.TLSConfig = sec.fpOperator
	}
	return cl.status()
}

// leader returns the index of the node that says it is the leader.
func (c *fpCluster) leader() (int, error) {
	for i, n := range c.nodes {
		if n.proc == nil || n.proc.exited() {
			continue
		}
		s, err := c.status(n)
		if err == nil && strings.EqualFold(s.State, "leader") {
			return i, nil
		}
	}
	return -1, errors.New("no fencepost node reports itself leader")
}

// waitLeader waits until some node is leader.
func (c *fpCluster) waitLeader(d time.Duration) (int, error) {
	idx := -1
	err := waitFor(d, "fencepost leader", func() error {
		var err error
		idx, err = c.leader()
		return err
	})
	return idx, err
}

// waitMembers waits until the leader lists want members and every running
// node agrees on who leads.
func (c *fpCluster) waitMembers(want int, d time.Duration) error {
	return waitFor(d, "fencepost membership", func() error {
		var leader string
		for _, n := range c.nodes {
			s, err := c.status(n)
			if err != nil {
				return fmt.Errorf("%s: %w", n.id, err)
			}
			if s.Leader == "" || (leader != "" && s.Leader != leader) {
				return fmt.Errorf("%s sees leader %q", n.id, s.Leader)
			}
			leader = s.Leader
			if strings.EqualFold(s.State, "leader") && len(s.Members) < want {
				return fmt.Errorf("%d members", len(s.Members))
			}
		}
		return nil
	})
}

// leaderAddr returns the leader's HTTP address.
func (c *fpCluster) leaderAddr() (string, error) {
	i, err := c.waitLeader(10 * time.Second)
	if err != nil {
		return "", err
	}
	return c.nodes[i].httpAddr, nil
}

// name reports the system's label in tables.
func (c *fpCluster) name() string { return "fencepost" }

// kill SIGKILLs node i.
func (c *fpCluster) kill(i int) { c.nodes[i].proc.kill() }

// restart starts node i again on its old data dir and waits for the
// cluster to have every node back with one leader.
func (c *fpCluster) restart(i int) error {
	if err := c.startNode(c.nodes[i]); err != nil {
		return err
	}
	return c.waitMembers(3, 20*time.Second)
}

// endpoints lists every node's HTTP address.
func (c *fpCluster) endpoints() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.httpAddr)
	}
	return out
}

// pid returns node i's PID.
func (c *fpCluster) pid(i int) int { return c.nodes[i].proc.pid() }

// procs lists every node's process (nil before it started).
func (c *fpCluster) procs() procSet {
	out := make(procSet, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.proc
	}
	return out
}

// stop terminates every node by PID.
func (c *fpCluster) stop() { c.procs().stop() }

// pids lists the PIDs of the running nodes.
func (c *fpCluster) pids() []int { return c.procs().pids() }
