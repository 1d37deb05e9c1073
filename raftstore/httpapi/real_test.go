package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/raftstore/httpapi/httpapitest"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zapcore"
)

// A follower of a real 3-node cluster forwards mutations, linearizable
// reads and heartbeats to the leader; clients never see not_leader.
func TestRealFollowerForwarding(t *testing.T) {
	cl := httpapitest.StartCluster(t, 3, zapcore.WarnLevel)
	leader := cl.Nodes[cl.WaitLeader()]
	follower := cl.Nodes[cl.Follower()]
	base := "http://" + follower.HTTP.Addr()

	r := do(t, "POST", base+api.PathSessions, []byte(`{"workerId":"w"}`), api.HeaderRequestID, "open-1")
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	require.Equal(t, "open-1", r.header[api.HeaderRequestID])
	var sess api.Session
	r.decode(t, &sess)

	r = do(t, "POST", base+path(api.PathAcquire, "{id}", "a:b"),
		mustJSON(t, api.AcquireRequest{SessionID: sess.SessionID, Create: true}))
	var g api.Grant
	r.decode(t, &g)
	require.Equal(t, "a:b", g.Lease.TaskID)

	r = do(t, "POST", base+path(api.PathHeartbeat, "{sid}", sess.SessionID), nil)
	var hb api.HeartbeatResponse
	r.decode(t, &hb)
	require.Positive(t, hb.ValidForMs)

	// The leader holds what the follower was asked to do.
	task, err := leader.Store.Task(t.Context(), "a:b", false)
	require.NoError(t, err)
	require.Equal(t, g.Lease.Epoch, task.Lease.Epoch)

	// Model errors travel back unchanged.
	r = do(t, "POST", base+path(api.PathCheckpoint, "{id}", "a:b"),
		mustJSON(t, api.CheckpointRequest{SessionID: sess.SessionID, Epoch: g.Lease.Epoch + 1, Seq: 1}))
	require.Equal(t, http.StatusConflict, r.status)
	require.Equal(t, lease.ErrorCode(lease.ErrStaleEpoch), r.problem(t).Code)

	// A linearizable read through the follower sees the write at once.
	r = do(t, "GET", base+path(api.PathTask, "{id}", "a:b"), nil)
	r.decode(t, &task)
	require.Equal(t, lease.TaskLeased, task.State)

	r = do(t, "GET", "http://"+follower.HTTP.Addr()+api.PathReady, nil)
	require.Equal(t, http.StatusOK, r.status)
}

// A write replies with the task without its lease history and journal, so
// the reply stays small however long the task lives; a read has both.
func TestWriteRepliesOmitHistory(t *testing.T) {
	cl := httpapitest.StartCluster(t, 1, zapcore.WarnLevel)
	base := "http://" + cl.Nodes[cl.WaitLeader()].HTTP.Addr()
	r := do(t, "POST", base+api.PathSessions, []byte(`{"workerId":"w"}`))
	var sess api.Session
	r.decode(t, &sess)
	for range 3 {
		r = do(t, "POST", base+path(api.PathAcquire, "{id}", "h"),
			mustJSON(t, api.AcquireRequest{SessionID: sess.SessionID, Create: true}))
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		var g api.Grant
		r.decode(t, &g)
		require.Empty(t, g.Task.History(), "a grant carries no history")
		require.NotNil(t, g.Task.Lease)
		r = do(t, "POST", base+path(api.PathRelease, "{id}", "h"),
			mustJSON(t, api.ReleaseRequest{SessionID: sess.SessionID, Epoch: g.Lease.Epoch, Outcome: lease.OutcomeGivenBack}))
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		require.NotContains(t, string(r.body), `"history"`)
	}
	r = do(t, "GET", base+path(api.PathTask, "{id}", "h"), nil)
	var task lease.Task
	r.decode(t, &task)
	require.Len(t, task.History(), 2, "a read has the past leases (the last one is task.lease)")
}
