package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/raftstore"
	"github.com/fencepost/fencepost/raftstore/httpapi"
	"github.com/fencepost/fencepost/raftstore/httpapi/httpapitest"
	"github.com/stretchr/testify/require"
)

func path(tmpl string, kv ...string) string {
	for i := 0; i+1 < len(kv); i += 2 {
		tmpl = strings.ReplaceAll(tmpl, kv[i], url.PathEscape(kv[i+1]))
	}
	return tmpl
}

func TestLifecycleOverHTTP(t *testing.T) {
	store := httpapitest.New()
	base := "http://" + startServer(t, store).Addr()

	r := do(t, "POST", base+api.PathSessions, mustJSON(t, api.OpenSessionRequest{SessionID: "s1", WorkerID: "w1"}))
	require.Equal(t, http.StatusCreated, r.status)
	var sess api.Session
	r.decode(t, &sess)
	require.Equal(t, "s1", sess.SessionID)

	// The safe alphabet's punctuation travels in the path as it is.
	const id = "job:1@a.b_c"
	r = do(t, "POST", base+api.PathTasks, mustJSON(t, api.CreateTaskRequest{TaskID: id, Priority: 3}))
	require.Equal(t, http.StatusCreated, r.status)

	r = do(t, "POST", base+path(api.PathAcquire, "{id}", id), mustJSON(t, api.AcquireRequest{SessionID: "s1"}))
	var g api.Grant
	r.decode(t, &g)
	require.Equal(t, id, g.Lease.TaskID)
	require.Equal(t, lease.StatusActive, g.Lease.Status)
	require.Positive(t, g.Lease.Epoch)
	require.Positive(t, g.ValidForMs)

	r = do(t, "POST", base+path(api.PathHeartbeat, "{sid}", "s1"), nil)
	var hb api.HeartbeatResponse
	r.decode(t, &hb)
	require.Len(t, hb.Leases, 1)
	require.Equal(t, g.Lease.Epoch, hb.Leases[0].Epoch)

	r = do(t, "POST", base+path(api.PathCheckpoint, "{id}", id), mustJSON(t, api.CheckpointRequest{
		SessionID: "s1", Epoch: g.Lease.Epoch, Seq: 1, Step: "fetched", Data: []byte("state")}))
	var task lease.Task
	r.decode(t, &task)
	require.Equal(t, uint64(1), task.Checkpoint.Seq)

	// An old epoch is refused, with the model's code.
	r = do(t, "POST", base+path(api.PathCheckpoint, "{id}", id), mustJSON(t, api.CheckpointRequest{
		SessionID: "s1", Epoch: g.Lease.Epoch - 1, Seq: 2}))
	require.Equal(t, http.StatusConflict, r.status)
	require.Equal(t, "stale_epoch", r.problem(t).Code)

	r = do(t, "GET", base+path(api.PathTask, "{id}", id), nil)
	r.decode(t, &task)
	require.Equal(t, lease.TaskLeased, task.State)

	r = do(t, "GET", base+api.PathTasks+"?state=leased&limit=10", nil)
	var list api.TaskList
	r.decode(t, &list)
	require.Len(t, list.Tasks, 1)

	r = do(t, "GET", base+api.PathLeases+"?stale=true", nil)
	var leases api.LeaseList
	r.decode(t, &leases)
	require.Len(t, leases.Leases, 1)

	r = do(t, "POST", base+path(api.PathRelease, "{id}", id), mustJSON(t, api.ReleaseRequest{
		SessionID: "s1", Epoch: g.Lease.Epoch, Outcome: lease.OutcomeCompleted}))
	r.decode(t, &task)
	require.Equal(t, lease.TaskCompleted, task.State)

	// Releasing twice is a precise 409, not a crash or a 500.
	r = do(t, "POST", base+path(api.PathRelease, "{id}", id), mustJSON(t, api.ReleaseRequest{
		SessionID: "s1", Epoch: g.Lease.Epoch, Outcome: lease.OutcomeCompleted}))
	require.Equal(t, http.StatusConflict, r.status)

	r = do(t, "DELETE", base+path(api.PathTask, "{id}", id), nil)
	require.Equal(t, http.StatusNoContent, r.status)
	r = do(t, "GET", base+path(api.PathTask, "{id}", id), nil)
	require.Equal(t, "task_not_found", r.problem(t).Code)

	r = do(t, "DELETE", base+path(api.PathSession, "{sid}", "s1"), nil)
	require.Equal(t, http.StatusNoContent, r.status)

	r = do(t, "GET", base+api.PathKeys, nil)
	require.Equal(t, http.StatusOK, r.status)
	r = do(t, "GET", base+api.PathCluster, nil)
	var st api.ClusterStatus
	r.decode(t, &st)
	require.Equal(t, "Leader", st.State)
}

func TestBadInput(t *testing.T) {
	store := httpapitest.New()
	base := "http://" + startServer(t, store, func(c *httpapi.Config) { c.MaxBodyBytes = 4096 }).Addr()
	do(t, "POST", base+api.PathSessions, mustJSON(t, api.OpenSessionRequest{SessionID: "s1", WorkerID: "w1"}))

	long := strings.Repeat("x", httpapi.MaxIDBytes+1)
	cases := []struct {
		name, method, path string
		body               []byte
		status             int
		code               string
	}{
		{"unknown field", "POST", api.PathTasks, []byte(`{"taskId":"a","prio":1}`), 400, api.CodeUnknownField},
		{"invalid utf8", "POST", api.PathTasks, []byte("{\"taskId\":\"a\xff\"}"), 400, api.CodeBadRequest},
		{"trailing data", "POST", api.PathTasks, []byte(`{"taskId":"a"} {}`), 400, api.CodeBadRequest},
		{"not an object", "POST", api.PathTasks, []byte(`[1]`), 400, api.CodeBadRequest},
		{"bad json", "POST", api.PathTasks, []byte(`{"taskId":`), 400, api.CodeBadRequest},
		{"empty task id", "POST", api.PathTasks, []byte(`{"taskId":""}`), 400, api.CodeBadRequest},
		{"huge task id", "POST", api.PathTasks, mustJSON(t, api.CreateTaskRequest{TaskID: long}), 400, api.CodeBadRequest},
		{"control char id", "POST", api.PathTasks, []byte(`{"taskId":"a\u0007"}`), 400, api.CodeBadRequest},
		{"empty path id", "POST", "/v1/tasks//acquire", []byte(`{"sessionId":"s1"}`), 400, api.CodeBadRequest},
		{"huge path id", "GET", "/v1/tasks/" + long, nil, 400, api.CodeBadRequest},
		{"bad escape", "GET", "/v1/tasks/%zz", nil, 400, api.CodeBadRequest},
		{"body too large", "POST", api.PathTasks, []byte(`{"taskId":"a","payload":"` + strings.Repeat("A", 8192) + `"}`), 413, api.CodeTooLarge},
		{"wrong method", "PUT", api.PathTasks, nil, 405, api.CodeMethod},
		{"no route", "GET", "/v1/nope", nil, 404, api.CodeNotFound},
		{"trailing slash", "GET", "/v1/tasks/", nil, 400, api.CodeBadRequest},
		{"unknown query", "GET", api.PathTasks + "?sate=leased", nil, 400, api.CodeBadRequest},
		{"bad state", "GET", api.PathTasks + "?state=sleeping", nil, 400, api.CodeBadRequest},
		{"bad limit", "GET", api.PathTasks + "?limit=-1", nil, 400, api.CodeBadRequest},
		{"bad stale", "GET", api.PathLeases + "?stale=maybe", nil, 400, api.CodeBadRequest},
		{"body on delete", "DELETE", "/v1/tasks/a", []byte(`{}`), 400, api.CodeBadRequest},
		{"unknown profile", "POST", api.PathTasks, []byte(`{"taskId":"a","profile":"eternal"}`), 400, httpapi.CodeUnknownProfile},
		{"unknown session", "POST", api.PathClaim, []byte(`{"sessionId":"nobody"}`), 404, "session_not_found"},
		{"nothing to claim", "POST", api.PathClaim, []byte(`{"sessionId":"s1"}`), 404, "no_task"},
		{"unknown task", "POST", "/v1/tasks/ghost/acquire", []byte(`{"sessionId":"s1"}`), 404, "task_not_found"},
		{"signal not waiting", "POST", "/v1/tasks/ghost/signal", nil, 404, "task_not_found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := do(t, c.method, base+c.path, c.body)
			require.Equal(t, c.status, r.status, "body: %s", r.body)
			p := r.problem(t)
			require.Equal(t, c.code, p.Code)
			if c.status == 405 {
				require.Equal(t, "GET, HEAD, POST", r.header["Allow"])
			}
		})
	}
}

func TestStoreErrorsMapOnce(t *testing.T) {
	store := httpapitest.New()
	base := "http://" + startServer(t, store).Addr()
	cases := []struct {
		err        error
		status     int
		code       string
		retryAfter bool
	}{
		{raftstore.ErrTimeout, 504, api.CodeTimeout, false},
		{raftstore.ErrNoLeader, 503, api.CodeUnavailable, true},
		{raftstore.ErrShutdown, 503, api.CodeUnavailable, true},
		{raftstore.ErrTooLarge, 413, api.CodeTooLarge, false},
		{raftstore.ErrInvalidArgument, 400, api.CodeBadRequest, false},
		{fmt.Errorf("wrapped: %w", lease.ErrLeaseHeld), 409, "lease_held", false},
		{fmt.Errorf("%w: bad", raftstore.ErrInvalidArgument), 400, api.CodeBadRequest, false},
		// Not holding a lease is a conflict with its state, as on the
		// sidecar's control API, not a refusal of the caller's identity.
		{lease.ErrNotHolder, 409, "not_holder", false},
		{lease.ErrJournalFull, 409, "journal_full", false},
		{lease.ErrInvalid, 400, "invalid", false},
		{errors.New("disk on fire"), 500, api.CodeInternal, false},
	}
	// Every model error answers with the status and code of the model's
	// own table: nothing here can drift from it.
	for _, e := range lease.Errors() {
		cases = append(cases, struct {
			err        error
			status     int
			code       string
			retryAfter bool
		}{fmt.Errorf("store: %w", e.Err), e.Status, e.Code, false})
	}
	for _, c := range cases {
		t.Run(c.code+"/"+c.err.Error(), func(t *testing.T) {
			store.Inject("CreateTask", httpapitest.Fault{Err: c.err})
			r := do(t, "POST", base+api.PathTasks, []byte(`{"taskId":"t"}`))
			require.Equal(t, c.status, r.status)
			p := r.problem(t)
			require.Equal(t, c.code, p.Code)
			if c.retryAfter {
				require.Equal(t, "1", r.header["Retry-After"])
			}
			if c.code == api.CodeInternal {
				require.NotContains(t, p.Detail, "fire", "internal errors are logged, not sent")
			}
		})
	}
}

func TestRequestID(t *testing.T) {
	store := httpapitest.New()
	base := "http://" + startServer(t, store).Addr()

	r := do(t, "POST", base+api.PathSessions, []byte(`{"workerId":"w"}`), api.HeaderRequestID, "rid-1")
	require.Equal(t, "rid-1", r.header[api.HeaderRequestID])
	var first api.Session
	r.decode(t, &first)
	r = do(t, "POST", base+api.PathSessions, []byte(`{"workerId":"w"}`))
	generated := r.header[api.HeaderRequestID]
	require.Len(t, generated, 32)
	require.Equal(t, []string{"rid-1", generated}, store.CallsOf("OpenSession"))

	// The same request id twice is one session: the store de-duplicates.
	r1 := do(t, "POST", base+api.PathSessions, []byte(`{"workerId":"w"}`), api.HeaderRequestID, "rid-1")
	var a, b api.Session
	r1.decode(t, &a)
	r.decode(t, &b)
	require.Equal(t, first.SessionID, a.SessionID, "the same rid names the same session")
	require.NotEqual(t, a.SessionID, b.SessionID)

	r = do(t, "POST", base+api.PathSessions, []byte(`{"workerId":"w"}`), api.HeaderRequestID, "bad\x01id")
	require.Equal(t, 400, r.status)
}

func TestHealthReadyMetrics(t *testing.T) {
	store := httpapitest.New()
	base := "http://" + startServer(t, store).Addr()

	r := do(t, "GET", base+api.PathHealth, nil)
	require.Equal(t, 200, r.status)
	require.Equal(t, "ok\n", string(r.body))
	r = do(t, "GET", base+api.PathReady, nil)
	require.Equal(t, 200, r.status)
	store.SetReady(raftstore.ErrNotReady)
	r = do(t, "GET", base+api.PathReady, nil)
	require.Equal(t, 503, r.status)
	require.Equal(t, api.CodeUnavailable, r.problem(t).Code)
	store.SetReady(errors.New("catching up"))
	require.Equal(t, 503, do(t, "GET", base+api.PathReady, nil).status)

	do(t, "GET", base+"/v1/tasks/secret-task-id", nil)
	r = do(t, "GET", base+api.PathMetrics, nil)
	require.Equal(t, 200, r.status)
	text := string(r.body)
	require.Contains(t, text, `fencepost_http_requests_total{code="404",method="GET",route="/v1/tasks/{id}"} 1`)
	require.Contains(t, text, "fencepost_http_request_duration_seconds_bucket")
	require.NotContains(t, text, "secret-task-id", "ids are never label values")
}

func TestConfig(t *testing.T) {
	_, err := httpapi.New(httpapi.Config{}, httpapitest.New())
	require.ErrorIs(t, err, httpapi.ErrConfig)
	_, err = httpapi.New(httpapi.Config{Addr: "127.0.0.1:0", MaxBodyBytes: -1}, httpapitest.New())
	require.ErrorIs(t, err, httpapi.ErrConfig)
	_, err = httpapi.New(httpapi.Config{Addr: "127.0.0.1:0"}, nil)
	require.ErrorIs(t, err, httpapi.ErrConfig)

	s, err := httpapi.New(httpapi.Config{Addr: "127.0.0.1:0"}, httpapitest.New())
	require.NoError(t, err)
	require.Equal(t, "", s.Addr())
	require.NoError(t, s.Close(), "closing a server never started is fine")
	require.NoError(t, s.Start())
	require.Error(t, s.Start())
	require.NoError(t, s.Close())
}

// Close lets a request in flight finish before the server stops.
func TestCloseWaitsForRequestsInFlight(t *testing.T) {
	store := httpapitest.New()
	s, err := httpapi.New(httpapi.Config{Addr: "127.0.0.1:0"}, store)
	require.NoError(t, err)
	require.NoError(t, s.Start())
	store.Inject("CreateTask", httpapitest.Fault{Delay: 300 * time.Millisecond})
	done := make(chan reply, 1)
	go func() { done <- do(t, "POST", "http://"+s.Addr()+api.PathTasks, []byte(`{"taskId":"t"}`)) }()
	deadline := time.Now().Add(5 * time.Second)
	for len(store.CallsOf("CreateTask")) == 0 {
		require.True(t, time.Now().Before(deadline), "request never reached the store")
		time.Sleep(5 * time.Millisecond)
	}
	require.NoError(t, s.Close())
	r := <-done
	require.Equal(t, http.StatusCreated, r.status)
}

// Close abandons reads in flight (long polls included) rather than waiting
// for them: the client retries a read elsewhere at no cost.
func TestCloseAbandonsReads(t *testing.T) {
	store := httpapitest.New()
	s, err := httpapi.New(httpapi.Config{Addr: "127.0.0.1:0"}, store)
	require.NoError(t, err)
	require.NoError(t, s.Start())
	store.Inject("Leases", httpapitest.Fault{Delay: 10 * time.Second})
	done := make(chan reply, 1)
	go func() { done <- do(t, "GET", "http://"+s.Addr()+api.PathLeases, nil) }()
	deadline := time.Now().Add(5 * time.Second)
	for len(store.CallsOf("Leases")) == 0 {
		require.True(t, time.Now().Before(deadline), "request never reached the store")
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	require.NoError(t, s.Close())
	require.Less(t, time.Since(start), 3*time.Second)
	r := <-done
	require.Equal(t, http.StatusServiceUnavailable, r.status)
	require.Equal(t, api.CodeUnavailable, r.problem(t).Code)
}

// The double validates and maps requests through the store's own
// mapping (raftstore.Commands), so it refuses and accepts what the
// cluster does.
func TestDoubleMapsRequestsAsTheStore(t *testing.T) {
	st := httpapitest.New()
	ctx := context.Background()
	_, err := st.CreateTask(ctx, "r1", api.CreateTaskRequest{TaskID: "t", Profile: "nope"})
	require.ErrorIs(t, err, raftstore.ErrUnknownProfile)
	_, err = st.CreateTask(ctx, "r2", api.CreateTaskRequest{TaskID: "t"})
	require.NoError(t, err)
	sess, err := st.OpenSession(ctx, "r3", api.OpenSessionRequest{WorkerID: "w"})
	require.NoError(t, err)
	// A profile is read only when the acquire creates the task.
	g, err := st.Acquire(ctx, "r4", "t", api.AcquireRequest{SessionID: sess.SessionID, Profile: "nope"})
	require.NoError(t, err)
	require.Equal(t, raftstore.DefaultProfiles()[raftstore.DefaultProfileName].TTL.Milliseconds(), g.ValidForMs)
	_, err = st.Checkpoint(ctx, "r5", "t", api.CheckpointRequest{SessionID: sess.SessionID})
	require.ErrorIs(t, err, raftstore.ErrInvalidArgument, "epoch is required")
}
