package httpapitest

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/fencepost/fencepost/raftstore"
	"github.com/fencepost/fencepost/raftstore/httpapi"
	"github.com/fencepost/fencepost/raftstore/node"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
)

// clusterWait bounds every wait of a Cluster: elections with the timings
// below take well under a second, even on a loaded 2-core machine.
const clusterWait = 15 * time.Second

// Cluster is a real lease cluster of n members (raftstore + HTTP API) on
// loopback, for integration tests of the API and its clients.
type Cluster struct {
	t     testing.TB
	Nodes []*node.Node // nil once killed
}

// StartCluster starts n members on 127.0.0.1 with fresh data dirs and short
// raft timeouts, waits until every one is a voter that knows the leader,
// and closes them when the test ends. Logs go to the test log at level
// (zap.WarnLevel keeps test output short).
func StartCluster(t testing.TB, n int, level zapcore.Level) *Cluster {
	t.Helper()
	return StartClusterWith(t, n, level, nil)
}

// StartClusterWith is StartCluster with mod applied to each member's
// configuration before it starts (TLS, for example).
func StartClusterWith(t testing.TB, n int, level zapcore.Level, mod func(cfg *node.Config)) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	t.Cleanup(c.closeAll)
	// Members share one signing key, as every member's signing.key_file.
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		id := fmt.Sprintf("n%d", i+1)
		log := zaptest.NewLogger(t, zaptest.Level(level)).With(zap.String("node", id))
		cfg := node.Config{
			Store: raftstore.Config{
				NodeID: id, DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0", Bootstrap: i == 0,
				// Short timeouts as in raftstore's own tests; 150ms rather
				// than 50ms so a loaded shared machine does not depose a
				// healthy leader.
				HeartbeatTimeout: 150 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond,
				LeaderLeaseTimeout: 150 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
				SigningKey: key,
			},
			HTTP:      httpapi.Config{Addr: "127.0.0.1:0"},
			JoinRetry: 50 * time.Millisecond,
			Logger:    log,
		}
		if i > 0 {
			cfg.Join = []string{c.Nodes[0].HTTP.Addr()}
		}
		if mod != nil {
			mod(&cfg)
		}
		nd, err := node.Start(cfg)
		if err != nil {
			t.Fatalf("start %s: %v", id, err)
		}
		c.Nodes = append(c.Nodes, nd)
		if i == 0 {
			c.WaitLeader()
		}
	}
	for _, nd := range c.Nodes {
		select {
		case <-nd.Joined():
		case <-time.After(clusterWait):
			t.Fatalf("%s did not join", nd.Store.NodeID())
		}
	}
	c.waitFor("every member sees all voters and the leader", func() bool {
		for _, nd := range c.Nodes {
			st := nd.Store.Status()
			if len(st.Members) != n || nd.Store.LeaderHTTP() == "" || nd.Store.Ready() != nil {
				return false
			}
		}
		return true
	})
	return c
}

// Endpoints returns the HTTP addresses of the live members.
func (c *Cluster) Endpoints() []string {
	var out []string
	for _, nd := range c.Nodes {
		if nd != nil {
			out = append(out, nd.HTTP.Addr())
		}
	}
	return out
}

// WaitLeader waits until a live member leads and returns its index.
func (c *Cluster) WaitLeader() int {
	c.t.Helper()
	idx := -1
	c.waitFor("a leader", func() bool {
		for i, nd := range c.Nodes {
			if nd != nil && nd.Store.IsLeader() && nd.Store.Ready() == nil {
				idx = i
				return true
			}
		}
		return false
	})
	return idx
}

// Follower returns the index of a live member that is not the leader.
func (c *Cluster) Follower() int {
	c.t.Helper()
	leader := c.WaitLeader()
	for i, nd := range c.Nodes {
		if nd != nil && i != leader {
			return i
		}
	}
	c.t.Fatal("no follower")
	return -1
}

// Kill closes member i (its HTTP port then refuses connections).
func (c *Cluster) Kill(i int) {
	c.t.Helper()
	if err := c.Nodes[i].Close(); err != nil {
		c.t.Logf("close %d: %v", i, err)
	}
	c.Nodes[i] = nil
}

func (c *Cluster) closeAll() {
	for i, nd := range c.Nodes {
		if nd != nil {
			_ = nd.Close()
			c.Nodes[i] = nil
		}
	}
}

func (c *Cluster) waitFor(what string, cond func() bool) {
	c.t.Helper()
	WaitFor(c.t, what, cond)
}

// WaitFor polls cond until it holds, failing t after the cluster wait
// (15s, generous for elections on a loaded machine).
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(clusterWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
