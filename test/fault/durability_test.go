package fault

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/cluster"
	"github.com/fencepost/fencepost/test/scenario"
)

// heartbeater keeps a session (and every lease held through it) alive
// until stop, and reports any lease the cluster says is lost.
type heartbeater struct {
	// onLost, when set, is called with the send time of the last
	// acknowledged heartbeat before the reply that reported ls lost.
	onLost func(ls api.LeaseState, lastAcked time.Time)

	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	lost []api.LeaseState
	last time.Time // send time of the last acknowledged heartbeat
}

func (e *env) heartbeat(c *cluster.Client, sid string, every time.Duration, onLost func(api.LeaseState, time.Time)) *heartbeater {
	h := &heartbeater{onLost: onLost, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			sent := time.Now()
			resp, err := c.HeartbeatOnce(e.ctx, sid, api.HeartbeatRequest{})
			if err == nil {
				h.mu.Lock()
				prev := h.last
				h.last = sent
				var lost []api.LeaseState
				for _, ls := range resp.Leases {
					if ls.Signal != api.SignalNone && ls.Signal != api.SignalRevived {
						lost = append(lost, ls)
					}
				}
				h.lost = append(h.lost, lost...)
				h.mu.Unlock()
				if h.onLost != nil {
					for _, ls := range lost {
						h.onLost(ls, prev)
					}
				}
			}
			select {
			case <-h.stop:
				return
			case <-e.ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	e.t.Cleanup(h.halt)
	return h
}

// halt stops the heartbeats and waits for the loop to end (idempotent).
func (h *heartbeater) halt() {
	select {
	case <-h.stop:
	default:
		close(h.stop)
	}
	<-h.done
}

// ackedSince reports whether a heartbeat sent at or after t was
// acknowledged.
func (h *heartbeater) ackedSince(t time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.last.Before(t)
}

func (h *heartbeater) lostLeases() []api.LeaseState {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]api.LeaseState(nil), h.lost...)
}

// snapshots counts the snapshot directories raft wrote under dir.
func snapshots(dir string) int {
	m, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*", "meta.json"))
	return len(m)
}

// TestAcknowledgedCheckpointsSurviveFailoverRestartAndSnapshots (I5):
// checkpoints are written one after another while the leader is killed,
// a node that missed entries is brought back from a snapshot, snapshots
// are taken, and finally every node is stopped and restarted from its
// data directory. The last acknowledged checkpoint, with its data, is
// what the cluster returns, and every earlier acknowledged sequence
// number is below it.
func TestAcknowledgedCheckpointsSurviveFailoverRestartAndSnapshots(t *testing.T) {
	e := newEnv(t, scenario.ClusterConfig{
		TTL: 3 * time.Second, Grace: time.Second,
		SnapshotThreshold: 16, SnapshotInterval: 100 * time.Millisecond, TrailingLogs: 8,
	}, 90*time.Second)
	c := e.client(true)
	const task = "durable"
	sess, err := c.OpenSession(e.ctx, api.OpenSessionRequest{WorkerID: "durable-worker"})
	require.NoError(t, err)
	hb := e.heartbeat(c, sess.SessionID, 500*time.Millisecond, nil)
	g, err := c.Acquire(e.ctx, task, api.AcquireRequest{SessionID: sess.SessionID, Create: true, Profile: scenario.ProfileName})
	require.NoError(t, err)
	epoch := g.Lease.Epoch
	e.logf("worker", "holds %s epoch=%d", task, epoch)

	var acked uint64
	data := func(seq uint64) []byte { return fmt.Appendf(nil, "state-after-step-%d", seq) }
	checkpoint := func(n int) {
		for i := 0; i < n; i++ {
			seq := acked + 1
			_, err := c.Checkpoint(e.ctx, task, api.CheckpointRequest{
				SessionID: sess.SessionID, Epoch: epoch, Seq: seq, Step: fmt.Sprintf("step-%d", seq), Data: data(seq),
			})
			switch {
			case err == nil:
				acked = seq
			case errors.Is(err, lease.ErrCheckpointSeq):
				// An earlier attempt committed without an answer: not
				// acknowledged, so not counted; the next seq follows it.
				tk, rerr := c.Task(e.ctx, task, false)
				require.NoError(t, rerr)
				require.NotNil(t, tk.Checkpoint)
				acked = tk.Checkpoint.Seq
			default:
				e.logf("worker", "checkpoint seq=%d: %v (retrying)", seq, err)
			}
		}
	}

	checkpoint(20)
	e.logf("worker", "acknowledged checkpoints up to seq=%d", acked)
	old, err := e.cluster.WaitLeader(e.ctx)
	require.NoError(t, err)
	require.NoError(t, e.cluster.StopNode(old))
	e.logf("cluster", "leader %s killed at seq=%d", old.ID, acked)
	checkpoint(40) // through the election and well past TrailingLogs
	e.logf("worker", "acknowledged checkpoints up to seq=%d with %s down", acked, old.ID)
	nl, err := e.cluster.WaitLeader(e.ctx)
	require.NoError(t, err)
	eventually(t, 10*time.Second, 50*time.Millisecond, "a snapshot on the new leader", func() bool { return snapshots(nl.Dir) > 0 })
	require.NoError(t, e.cluster.RestartNode(old))
	require.NoError(t, e.cluster.WaitReady(e.ctx))
	e.logf("cluster", "%s restarted and caught up (snapshots on it: %d)", old.ID, snapshots(old.Dir))
	checkpoint(10)
	final := acked
	e.logf("worker", "last acknowledged checkpoint seq=%d", final)
	require.Empty(t, hb.lostLeases(), "the lease was kept through the failover")
	hb.halt()

	for _, n := range e.cluster.Nodes() {
		require.NoError(t, e.cluster.StopNode(n))
	}
	e.logf("cluster", "every node stopped")
	for _, n := range e.cluster.Nodes() {
		require.NoError(t, e.cluster.RestartNode(n))
	}
	_, err = e.cluster.WaitLeader(e.ctx)
	require.NoError(t, err)
	require.NoError(t, e.cluster.WaitReady(e.ctx))
	e.logf("cluster", "every node restarted from its data directory")

	tk, err := c.Task(e.ctx, task, false)
	require.NoError(t, err)
	require.NotNil(t, tk.Checkpoint, "I5: the checkpoint survived")
	require.Equal(t, final, tk.Checkpoint.Seq, "I5: the last acknowledged checkpoint is the latest")
	require.Equal(t, data(final), tk.Checkpoint.Data)
	require.Equal(t, epoch, tk.Checkpoint.Epoch)
	e.logf("cluster", "checkpoint after restart: seq=%d step=%s", tk.Checkpoint.Seq, tk.Checkpoint.Step)

	// Every replica holds the same state once caught up.
	nodes := e.cluster.Nodes()
	eventually(t, 10*time.Second, 50*time.Millisecond, "replicas agree", func() bool {
		first := nodes[0].Store.StateHash()
		idx := nodes[0].Store.AppliedIndex()
		for _, n := range nodes[1:] {
			if n.Store.AppliedIndex() != idx || n.Store.StateHash() != first {
				return false
			}
		}
		return true
	})
	for _, n := range nodes {
		_, err := os.Stat(filepath.Join(n.Dir, "raft-wal"))
		require.NoError(t, err)
	}
}
