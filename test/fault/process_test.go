package fault

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/test/netfault"
	"github.com/fencepost/fencepost/test/scenario"
)

// procNode is one `fencepost server` child process.
type procNode struct {
	id, dir, http, raft string
	args                []string
	p                   *netfault.Process
}

// procCluster is a 3-node cluster of `fencepost server` processes.
type procCluster struct {
	t     *testing.T
	tl    *scenario.Timeline
	nodes []*procNode
}

func startProcCluster(t *testing.T, tl *scenario.Timeline, ttl, grace time.Duration) *procCluster {
	t.Helper()
	pc := &procCluster{t: t, tl: tl}
	root := t.TempDir()
	for i, id := range []string{"n1", "n2", "n3"} {
		n := &procNode{id: id, dir: filepath.Join(root, id), http: netfault.FreeAddr(t), raft: netfault.FreeAddr(t)}
		n.args = []string{"server", "--node-id", id, "--data-dir", n.dir, "--http-addr", n.http, "--raft-addr", n.raft,
			"--leases-default-profile", scenario.ProfileName,
			"--set", "leases.profiles." + scenario.ProfileName + ".ttl=" + ttl.String(),
			"--set", "leases.profiles." + scenario.ProfileName + ".heartbeat=" + (ttl / 4).String(),
			"--leases-grace", grace.String(), "--log-format", "console", "--log-level", "info"}
		if i > 0 {
			n.args = append(n.args, "--join", pc.nodes[0].http)
		}
		pc.nodes = append(pc.nodes, n)
		pc.start(n)
		if i == 0 {
			pc.waitReady(n, 20*time.Second)
		}
	}
	for _, n := range pc.nodes {
		pc.waitReady(n, 20*time.Second)
	}
	return pc
}

func (pc *procCluster) start(n *procNode) {
	pc.t.Helper()
	p, err := netfault.Start(pc.t, netfault.ProcConfig{Name: n.id, Args: n.args})
	require.NoError(pc.t, err)
	n.p = p
	pc.t.Cleanup(func() {
		if pc.t.Failed() {
			pc.t.Logf("%s (pid %d) log tail:\n%s", n.id, p.PID(), p.Tail(30))
		}
		_ = p.Stop(5 * time.Second)
	})
	pc.tl.Logf(n.id, "process started, pid %d", p.PID())
}

func (pc *procCluster) waitReady(n *procNode, limit time.Duration) {
	pc.t.Helper()
	eventually(pc.t, limit, 50*time.Millisecond, n.id+" ready", func() bool {
		if !n.p.Running() {
			pc.t.Fatalf("%s exited: %v\n%s", n.id, n.p.ExitErr(), n.p.Tail(30))
		}
		resp, err := http.Get("http://" + n.http + api.PathReady)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// leader asks the running nodes who leads and returns that node (nil if
// none agrees yet).
func (pc *procCluster) leader() *procNode {
	c := &http.Client{Timeout: 300 * time.Millisecond}
	for _, n := range pc.nodes {
		if !n.p.Running() {
			continue
		}
		resp, err := c.Get("http://" + n.http + api.PathCluster)
		if err != nil {
			continue
		}
		var st api.ClusterStatus
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil || st.Leader == "" {
			continue
		}
		for _, m := range pc.nodes {
			if m.id == st.Leader {
				return m
			}
		}
	}
	return nil
}

func (pc *procCluster) endpoints() []string {
	var out []string
	for _, n := range pc.nodes {
		out = append(out, n.http)
	}
	return out
}

// TestLeaderProcessKilledAndFrozen runs the cluster as three `fencepost
// server` processes. A worker holds a task and checkpoints; the leader
// process is SIGKILLed (no clean shutdown), then restarted on its data
// directory; later the new leader is SIGSTOPped — frozen, cut off from
// everyone like a partitioned leader — and SIGCONTinued after a new
// leader took over. Through all of it the holder keeps its lease (no
// loss reported, I1: a second worker's acquire is always refused), a
// fresh task is acquirable within election + 1s of each fault (I7), and
// the acknowledged checkpoint survives (I5).
func TestLeaderProcessKilledAndFrozen(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the fencepost binary; skipped with -short")
	}
	const ttl, grace, election = 3 * time.Second, time.Second, 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	tl := scenario.NewTimeline(nil)
	t.Cleanup(func() {
		if t.Failed() || testing.Verbose() {
			t.Logf("timeline:\n%s", tl.String())
		}
	})
	netfault.Binary(t) // build before the clock matters
	pc := startProcCluster(t, tl, ttl, grace)
	var l *procNode
	eventually(t, 5*time.Second, 20*time.Millisecond, "a leader", func() bool { l = pc.leader(); return l != nil })
	tl.Logf("cluster", "3 processes ready, leader %s", l.id)

	c := scenario.NewClusterClient(pc.endpoints(), time.Second)
	defer c.Close()
	e := &env{t: t, ctx: ctx, tl: tl}
	sess, err := c.OpenSession(ctx, api.OpenSessionRequest{WorkerID: "holder"})
	require.NoError(t, err)
	hb := e.heartbeat(c, sess.SessionID, ttl/4, nil)
	const task = "survivor"
	g, err := c.Acquire(ctx, task, api.AcquireRequest{SessionID: sess.SessionID, Create: true})
	require.NoError(t, err)
	_, err = c.Checkpoint(ctx, task, api.CheckpointRequest{SessionID: sess.SessionID, Epoch: g.Lease.Epoch, Seq: 1, Step: "before-faults", Data: []byte("ckpt-1")})
	require.NoError(t, err)
	tl.Logf("holder", "holds %s epoch=%d, checkpoint seq=1 acknowledged", task, g.Lease.Epoch)

	// A short per-attempt timeout: a frozen node accepts connections and
	// never answers, and the client must move on to the next endpoint.
	rival := scenario.NewClusterClient(pc.endpoints(), 400*time.Millisecond)
	defer rival.Close()
	rsess, err := rival.OpenSession(ctx, api.OpenSessionRequest{WorkerID: "rival"})
	require.NoError(t, err)

	// probe measures how long after a fault a fresh task is acquirable,
	// and checks the held task is still refused to the rival (I1).
	probe := func(fault string, at time.Time, name string) {
		eventually(t, election+5*time.Second, 20*time.Millisecond, "a fresh task after "+fault, func() bool {
			_, err := rival.Acquire(ctx, name, api.AcquireRequest{SessionID: rsess.SessionID, Create: true})
			return err == nil
		})
		d := time.Since(at)
		tl.Logf("rival", "fresh task %s acquired %v after %s", name, d.Round(time.Millisecond), fault)
		require.LessOrEqual(t, d, election+time.Second, "I7 after %s", fault)
		_, err := rival.Acquire(ctx, task, api.AcquireRequest{SessionID: rsess.SessionID})
		require.ErrorIs(t, err, lease.ErrLeaseHeld, "I1: the held task is refused to the rival after %s", fault)
	}

	killed := pc.leader()
	require.NotNil(t, killed, "no leader")
	at := time.Now()
	require.NoError(t, killed.p.Kill())
	tl.Logf(killed.id, "leader SIGKILLed")
	probe("the leader's SIGKILL", at, "fresh-1")
	pc.start(killed)
	pc.waitReady(killed, 20*time.Second)
	tl.Logf(killed.id, "restarted on its data directory and ready")

	var frozen *procNode
	eventually(t, 5*time.Second, 20*time.Millisecond, "a leader", func() bool { frozen = pc.leader(); return frozen != nil })
	at = time.Now()
	require.NoError(t, frozen.p.Pause())
	tl.Logf(frozen.id, "leader SIGSTOPped")
	probe("the leader's SIGSTOP", at, "fresh-2")
	require.NoError(t, frozen.p.Resume())
	tl.Logf(frozen.id, "SIGCONTinued (deposed)")
	pc.waitReady(frozen, 20*time.Second)

	tk, err := c.Task(ctx, task, false)
	require.NoError(t, err)
	require.NotNil(t, tk.Lease)
	require.Equal(t, g.Lease.Epoch, tk.Lease.Epoch, "the holder kept its epoch")
	require.Equal(t, lease.StatusActive, tk.Lease.Status)
	require.NotNil(t, tk.Checkpoint)
	require.Equal(t, []byte("ckpt-1"), tk.Checkpoint.Data, "I5")
	require.Empty(t, hb.lostLeases(), "the holder never heard its lease was lost")
	hb.halt()
	tl.Logf("holder", "still holds %s epoch=%d, checkpoint intact", task, tk.Lease.Epoch)
}
