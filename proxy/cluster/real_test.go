package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/cluster"
	"github.com/fencepost/fencepost/raftstore/httpapi/httpapitest"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zapcore"
)

// These tests run the client against real raft stores behind the real
// HTTP API, on loopback.

func TestRealSingleNodeLifecycle(t *testing.T) {
	cl := httpapitest.StartCluster(t, 1, zapcore.WarnLevel)
	c := newClient(t, nil, cl.Endpoints()...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	sess, err := c.OpenSession(ctx, api.OpenSessionRequest{WorkerID: "w1"})
	require.NoError(t, err)
	require.NotEmpty(t, sess.SessionID)
	g, err := c.Acquire(ctx, "job-1", api.AcquireRequest{SessionID: sess.SessionID, Create: true})
	require.NoError(t, err)
	require.Equal(t, lease.StatusActive, g.Lease.Status)
	require.Positive(t, g.ValidForMs)

	hb, err := c.HeartbeatOnce(ctx, sess.SessionID, api.HeartbeatRequest{
		Leases: []api.HeldLease{{TaskID: "job-1", Epoch: g.Lease.Epoch}}})
	require.NoError(t, err)
	require.Positive(t, hb.ValidForMs)
	require.Len(t, hb.Leases, 1)
	require.Equal(t, api.SignalNone, hb.Leases[0].Signal)

	task, err := c.Checkpoint(ctx, "job-1", api.CheckpointRequest{SessionID: sess.SessionID,
		Epoch: g.Lease.Epoch, Seq: 1, Step: "one", Data: []byte("progress")})
	require.NoError(t, err)
	require.Equal(t, []byte("progress"), task.Checkpoint.Data)
	_, err = c.Checkpoint(ctx, "job-1", api.CheckpointRequest{SessionID: sess.SessionID,
		Epoch: g.Lease.Epoch - 1, Seq: 2})
	require.ErrorIs(t, err, lease.ErrStaleEpoch)

	task, err = c.Release(ctx, "job-1", api.ReleaseRequest{SessionID: sess.SessionID, Epoch: g.Lease.Epoch,
		Outcome: lease.OutcomeCompleted})
	require.NoError(t, err)
	require.Equal(t, lease.TaskCompleted, task.State)
	_, err = c.Release(ctx, "job-1", api.ReleaseRequest{SessionID: sess.SessionID, Epoch: g.Lease.Epoch,
		Outcome: lease.OutcomeCompleted})
	require.Error(t, err, "double release")
	var ce *cluster.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, 409, ce.Status)

	task, err = c.Task(ctx, "job-1", false)
	require.NoError(t, err)
	require.Equal(t, lease.TaskCompleted, task.State)
	st, err := c.Status(ctx)
	require.NoError(t, err)
	require.Len(t, st.Members, 1)
	require.NoError(t, c.Ready(ctx, cl.Endpoints()[0]))
}

func TestRealFollowerForwardsAndDeduplicates(t *testing.T) {
	cl := httpapitest.StartCluster(t, 3, zapcore.WarnLevel)
	follower := cl.Nodes[cl.Follower()]
	c := newClient(t, nil, follower.HTTP.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	sess, err := c.OpenSession(ctx, api.OpenSessionRequest{WorkerID: "w"})
	require.NoError(t, err)
	g, err := c.Acquire(ctx, "fwd", api.AcquireRequest{SessionID: sess.SessionID, Create: true})
	require.NoError(t, err)
	require.Positive(t, g.Lease.Epoch)
	_, err = c.HeartbeatOnce(ctx, sess.SessionID, api.HeartbeatRequest{})
	require.NoError(t, err, "heartbeats are forwarded too")

	// The same request id twice is applied once, also through a forward.
	rctx := cluster.WithRequestID(ctx, "create-dup-1")
	_, err = c.CreateTask(rctx, api.CreateTaskRequest{TaskID: "dup"})
	require.NoError(t, err)
	_, err = c.CreateTask(rctx, api.CreateTaskRequest{TaskID: "dup"})
	require.NoError(t, err, "a repeated request id replays the first result, not task_exists")
	_, err = c.CreateTask(ctx, api.CreateTaskRequest{TaskID: "dup"})
	require.ErrorIs(t, err, lease.ErrTaskExists)

	task, err := c.Task(ctx, "fwd", false)
	require.NoError(t, err)
	require.Equal(t, g.Lease.Epoch, task.Lease.Epoch)
}

func TestRealLeaderKill(t *testing.T) {
	cl := httpapitest.StartCluster(t, 3, zapcore.ErrorLevel)
	leader := cl.WaitLeader()
	// The leader first, so the client is stuck to it when it dies.
	eps := append([]string{cl.Nodes[leader].HTTP.Addr()}, cl.Endpoints()...)
	c := newClient(t, func(cfg *cluster.Config) { cfg.Timeout = 500 * time.Millisecond }, eps...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	sess, err := c.OpenSession(ctx, api.OpenSessionRequest{WorkerID: "w"})
	require.NoError(t, err)
	g, err := c.Acquire(ctx, "before", api.AcquireRequest{SessionID: sess.SessionID, Create: true})
	require.NoError(t, err)

	cl.Kill(leader)
	start := time.Now()
	_, err = c.Acquire(ctx, "after", api.AcquireRequest{SessionID: sess.SessionID, Create: true})
	require.NoError(t, err)
	t.Logf("acquire through the client succeeded %v after the leader was killed", time.Since(start))

	// The lease granted before the kill survived with its epoch.
	task, err := c.Task(ctx, "before", false)
	require.NoError(t, err)
	require.Equal(t, g.Lease.Epoch, task.Lease.Epoch)
	require.Equal(t, lease.StatusActive, task.Lease.Status)
	for i := range 5 {
		_, err := c.CreateTask(ctx, api.CreateTaskRequest{TaskID: fmt.Sprintf("later-%d", i)})
		require.NoError(t, err)
	}
}
