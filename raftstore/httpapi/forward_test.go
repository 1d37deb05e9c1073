package httpapi_test

import (
	"net"
	"net/http"
	"testing"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/raftstore/httpapi"
	"github.com/fencepost/fencepost/raftstore/httpapi/httpapitest"
	"github.com/stretchr/testify/require"
)

func TestFollowerForwardsToLeader(t *testing.T) {
	leaderStore := httpapitest.New()
	leader := startServer(t, leaderStore)
	followerStore := httpapitest.New()
	followerStore.SetFollower(true, leader.Addr())
	follower := startServer(t, followerStore)
	base := "http://" + follower.Addr()

	r := do(t, "POST", base+api.PathSessions, []byte(`{"sessionId":"s1","workerId":"w"}`),
		api.HeaderRequestID, "rid-fwd")
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	require.Equal(t, "rid-fwd", r.header[api.HeaderRequestID])
	require.Equal(t, []string{"rid-fwd"}, leaderStore.CallsOf("OpenSession"), "the leader sees the client's request id")

	// Escaped ids survive the hop, and problems are relayed as they are.
	r = do(t, "POST", base+path(api.PathAcquire, "{id}", "a:b"), []byte(`{"sessionId":"s1","create":true}`))
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	r = do(t, "GET", base+path(api.PathTask, "{id}", "a:b"), nil)
	require.Equal(t, http.StatusOK, r.status, "linearizable reads are forwarded too")
	r = do(t, "POST", base+api.PathClaim, []byte(`{"sessionId":"s1"}`))
	require.Equal(t, "no_task", r.problem(t).Code)

	// A generated request id is generated once, by the follower, and reused.
	r = do(t, "POST", base+api.PathTasks, []byte(`{"taskId":"t2"}`))
	require.Equal(t, http.StatusCreated, r.status)
	ids := leaderStore.CallsOf("CreateTask")
	require.Equal(t, r.header[api.HeaderRequestID], ids[len(ids)-1])

	// A stale read is served by the follower itself.
	r = do(t, "GET", base+path(api.PathTask, "{id}", "a:b")+"?stale=true", nil)
	require.Equal(t, "task_not_found", r.problem(t).Code, "the follower double holds no tasks")
}

func TestForwardFailures(t *testing.T) {
	t.Run("no leader known", func(t *testing.T) {
		st := httpapitest.New()
		st.SetFollower(true, "")
		base := "http://" + startServer(t, st).Addr()
		r := do(t, "POST", base+api.PathTasks, []byte(`{"taskId":"t"}`))
		require.Equal(t, http.StatusServiceUnavailable, r.status)
		require.Equal(t, api.CodeUnavailable, r.problem(t).Code)
		require.Equal(t, "1", r.header["Retry-After"])
	})
	t.Run("leader unreachable", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		dead := ln.Addr().String()
		require.NoError(t, ln.Close())
		st := httpapitest.New()
		st.SetFollower(true, dead)
		base := "http://" + startServer(t, st).Addr()
		r := do(t, "POST", base+api.PathTasks, []byte(`{"taskId":"t"}`))
		require.Equal(t, http.StatusServiceUnavailable, r.status)
		require.Equal(t, api.CodeUnavailable, r.problem(t).Code)
	})
	t.Run("loop between two stale followers", func(t *testing.T) {
		a, b := httpapitest.New(), httpapitest.New()
		sa, sb := startServer(t, a), startServer(t, b)
		a.SetFollower(true, sb.Addr())
		b.SetFollower(true, sa.Addr())
		r := do(t, "POST", "http://"+sa.Addr()+api.PathTasks, []byte(`{"taskId":"t"}`))
		require.Equal(t, http.StatusServiceUnavailable, r.status)
		require.Equal(t, api.CodeUnavailable, r.problem(t).Code)
		require.Len(t, a.CallsOf("CreateTask"), 1)
		require.Len(t, b.CallsOf("CreateTask"), 1, "one hop, never more")
	})
	t.Run("leader answers after the forward deadline", func(t *testing.T) {
		slow := httpapitest.New()
		slow.Inject("CreateTask", httpapitest.Fault{Delay: 500e6})
		leader := startServer(t, slow)
		st := httpapitest.New()
		st.SetFollower(true, leader.Addr())
		base := "http://" + startServer(t, st, func(c *httpapi.Config) { c.ForwardTimeout = 100e6 }).Addr()
		r := do(t, "POST", base+api.PathTasks, []byte(`{"taskId":"t"}`))
		require.Equal(t, http.StatusBadGateway, r.status)
		require.Equal(t, api.CodeUnknownOutcome, r.problem(t).Code)
	})
}
