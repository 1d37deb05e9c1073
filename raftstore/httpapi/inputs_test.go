package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/raftstore/httpapi"
	"github.com/fencepost/fencepost/raftstore/httpapi/httpapitest"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zapcore"
)

// TestInputsThatCouldCorrupt makes each attack on stored state the issue
// lists against a real node, and checks it is refused and nothing changed;
// the same requests done right still work.
func TestInputsThatCouldCorrupt(t *testing.T) {
	cl := httpapitest.StartCluster(t, 1, zapcore.WarnLevel)
	base := "http://" + cl.Nodes[0].HTTP.Addr()
	var sess api.Session
	do(t, "POST", base+api.PathSessions, []byte(`{"workerId":"w"}`)).decode(t, &sess)
	var g api.Grant
	do(t, "POST", base+taskURL(api.PathAcquire, "job"), mustJSON(t, api.AcquireRequest{SessionID: sess.SessionID, Create: true})).decode(t, &g)
	ckpt := func(body string, rid string) reply {
		return do(t, "POST", base+taskURL(api.PathCheckpoint, "job"), []byte(body), api.HeaderRequestID, rid)
	}
	sid, ep := sess.SessionID, g.Lease.Epoch

	// seq 2^64-1: refused at the top, never wrapped. seq 2^53-1 (the
	// probe's jam): refused, the jump is past the window.
	r := ckpt(fmt.Sprintf(`{"sessionId":%q,"epoch":%d,"seq":18446744073709551615}`, sid, ep), "c1")
	require.Equal(t, http.StatusConflict, r.status, "body: %s", r.body)
	require.Equal(t, lease.ErrorCode(lease.ErrCheckpointSeq), r.problem(t).Code)
	r = ckpt(fmt.Sprintf(`{"sessionId":%q,"epoch":%d,"seq":%d}`, sid, ep, uint64(lease.MaxCheckpointSeq)), "c0")
	require.Equal(t, http.StatusConflict, r.status, "body: %s", r.body)
	require.Equal(t, lease.ErrorCode(lease.ErrCheckpointSeqJump), r.problem(t).Code)
	r = ckpt(fmt.Sprintf(`{"sessionId":%q,"epoch":%d,"seq":%d}`, sid, ep, uint64(lease.MaxCheckpointSeqJump)), "c2")
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	r = ckpt(fmt.Sprintf(`{"sessionId":%q,"epoch":%d}`, sid, ep), "c3")
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	task, err := cl.Nodes[0].Store.Task(t.Context(), "job", false)
	require.NoError(t, err)
	require.Equal(t, uint64(lease.MaxCheckpointSeqJump+1), task.Checkpoint.Seq, "seq omitted is the next one")

	// A request id reused for a different command: 422, not the first reply.
	r = ckpt(fmt.Sprintf(`{"sessionId":%q,"epoch":%d,"step":"other"}`, sid, ep), "c2")
	require.Equal(t, http.StatusUnprocessableEntity, r.status, "body: %s", r.body)
	require.Equal(t, lease.ErrorCode(lease.ErrRequestReused), r.problem(t).Code)
	// The same command with the same id is a retry: replayed.
	r = ckpt(fmt.Sprintf(`{"sessionId":%q,"epoch":%d,"seq":%d}`, sid, ep, uint64(lease.MaxCheckpointSeqJump)), "c2")
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)

	// Duplicate keys and case variants.
	for _, body := range []string{
		fmt.Sprintf(`{"sessionId":"nobody","sessionId":%q,"epoch":%d,"step":"x"}`, sid, ep),
		fmt.Sprintf(`{"SessionId":%q,"epoch":%d,"step":"x"}`, sid, ep),
	} {
		r = ckpt(body, "")
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", body, r.body)
	}

	// Task ids outside the alphabet, priorities out of bounds.
	for _, id := range []string{"..", "a%2Fb", "%E2%80%AEevil", "a%20b"} {
		r = do(t, "POST", base+taskURL(api.PathAcquire, id), mustJSON(t, api.AcquireRequest{SessionID: sid, Create: true}))
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", id, r.body)
		r = do(t, "POST", base+api.PathTasks, []byte(fmt.Sprintf(`{"taskId":%q}`, id)))
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", id, r.body)
	}
	r = do(t, "POST", base+api.PathTasks, []byte(`{"taskId":"p","priority":-9223372036854775808}`))
	require.Equal(t, http.StatusBadRequest, r.status, "body: %s", r.body)
	r = do(t, "POST", base+api.PathTasks, []byte(fmt.Sprintf(`{"taskId":"p","priority":%d}`, lease.MaxPriority)))
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
}

// TestListsAreBounded: payloads stay out of lists unless asked for, and a
// page ends once its encoding passes MaxListBytes, with Next to go on.
func TestListsAreBounded(t *testing.T) {
	store := httpapitest.New()
	s := startServer(t, store, func(c *httpapi.Config) { c.MaxListBytes = 64 << 10 })
	base := "http://" + s.Addr()
	payload := make([]byte, 30<<10)
	for i := range 10 {
		r := do(t, "POST", base+api.PathTasks, mustJSON(t, api.CreateTaskRequest{TaskID: fmt.Sprint("t", i), Payload: payload}))
		require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	}
	r := do(t, "GET", base+api.PathTasks, nil)
	require.Less(t, len(r.body), 16<<10, "no payloads in a plain list")
	var list api.TaskList
	r.decode(t, &list)
	require.Len(t, list.Tasks, 10)

	seen := 0
	after := ""
	for range 10 {
		r = do(t, "GET", base+api.PathTasks+"?bodies=true&after="+after, nil)
		require.LessOrEqual(t, len(r.body), 64<<10+40<<10, "one page is about MaxListBytes")
		list = api.TaskList{}
		r.decode(t, &list)
		seen += len(list.Tasks)
		for _, tk := range list.Tasks {
			require.Len(t, tk.Payload, len(payload))
		}
		if list.Next == "" {
			break
		}
		after = list.Next
	}
	require.Equal(t, 10, seen, "paging reaches every task")
	r = do(t, "GET", base+api.PathTasks+"?limit=10000", nil)
	require.Equal(t, http.StatusBadRequest, r.status)
}

// TestPlainHTTPOnlyOnLoopback: without TLS the API refuses to listen on
// anything but loopback.
func TestPlainHTTPOnlyOnLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "10.1.2.3:7400", "[::]:0"} {
		_, err := httpapi.New(httpapi.Config{Addr: addr}, httpapitest.New())
		require.ErrorIs(t, err, httpapi.ErrConfig, addr)
	}
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0", "localhost:0"} {
		_, err := httpapi.New(httpapi.Config{Addr: addr}, httpapitest.New())
		require.NoError(t, err, addr)
	}
}
