package cluster_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy"
	"github.com/fencepost/fencepost/proxy/cluster"
	"github.com/fencepost/fencepost/raftstore"
	"github.com/fencepost/fencepost/raftstore/httpapi/httpapitest"
	"github.com/stretchr/testify/require"
)

// The sidecar's view of the cluster is satisfied by the client.
var _ proxy.Cluster = (*cluster.Client)(nil)

func TestLifecycle(t *testing.T) {
	_, c := single(t)
	ctx := context.Background()

	sess, err := c.OpenSession(ctx, api.OpenSessionRequest{SessionID: "s1", WorkerID: "w1"})
	require.NoError(t, err)
	require.Equal(t, "s1", sess.SessionID)

	const id = "report:2026-Q4@eu" // the safe alphabet's punctuation passes
	task, err := c.CreateTask(ctx, api.CreateTaskRequest{TaskID: id, Profile: "workflow"})
	require.NoError(t, err)
	require.Equal(t, lease.TaskPending, task.State)
	_, err = c.CreateTask(ctx, api.CreateTaskRequest{TaskID: id})
	require.ErrorIs(t, err, lease.ErrTaskExists)

	g, err := c.Acquire(ctx, id, api.AcquireRequest{SessionID: "s1"})
	require.NoError(t, err)
	require.Equal(t, id, g.Lease.TaskID)
	epoch := g.Lease.Epoch

	hb, err := c.HeartbeatOnce(ctx, "s1", api.HeartbeatRequest{Leases: []api.HeldLease{{TaskID: id, Epoch: epoch}}})
	require.NoError(t, err)
	require.Positive(t, hb.ValidForMs)

	task, err = c.Checkpoint(ctx, id, api.CheckpointRequest{SessionID: "s1", Epoch: epoch, Seq: 1, Step: "a"})
	require.NoError(t, err)
	require.Equal(t, "a", task.Checkpoint.Step)
	_, err = c.Checkpoint(ctx, id, api.CheckpointRequest{SessionID: "s1", Epoch: epoch + 100, Seq: 2})
	require.ErrorIs(t, err, lease.ErrStaleEpoch)
	var ce *cluster.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, 409, ce.Status)
	_, err = c.Checkpoint(ctx, id, api.CheckpointRequest{SessionID: "other", Epoch: epoch, Seq: 2})
	require.ErrorIs(t, err, lease.ErrNotHolder)

	in, err := c.Intent(ctx, id, api.IntentRequest{SessionID: "s1", Epoch: epoch, Key: "k1", Method: "POST",
		URL: "http://pay/charge", DeadlineMs: 1000})
	require.NoError(t, err)
	require.False(t, in.Replay)
	eff, err := c.Outcome(ctx, id, "k/1?", api.OutcomeRequest{Epoch: epoch, Status: 200})
	require.ErrorIs(t, err, lease.ErrInvalid, "no intent under that key: %v", eff)
	eff, err = c.Outcome(ctx, id, "k1", api.OutcomeRequest{Epoch: epoch, Status: 201})
	require.NoError(t, err)
	require.Equal(t, lease.EffectDone, eff.State)

	list, err := c.Tasks(ctx, lease.TaskFilter{State: lease.TaskLeased, Limit: 5}, false)
	require.NoError(t, err)
	require.Len(t, list.Tasks, 1)
	leases, err := c.Leases(ctx, true)
	require.NoError(t, err)
	require.Len(t, leases.Leases, 1)

	task, err = c.Release(ctx, id, api.ReleaseRequest{SessionID: "s1", Epoch: epoch, Outcome: lease.OutcomeCompleted})
	require.NoError(t, err)
	require.Equal(t, lease.TaskCompleted, task.State)
	_, err = c.Acquire(ctx, id, api.AcquireRequest{SessionID: "s1"})
	require.ErrorIs(t, err, lease.ErrTaskFinal)
	_, err = c.Claim(ctx, api.ClaimRequest{SessionID: "s1"})
	require.ErrorIs(t, err, lease.ErrNoTask)

	task, err = c.Task(ctx, id, false)
	require.NoError(t, err)
	require.Equal(t, lease.TaskCompleted, task.State)
	require.NoError(t, c.DeleteTask(ctx, id))
	_, err = c.Task(ctx, id, true)
	require.ErrorIs(t, err, lease.ErrTaskNotFound)

	_, err = c.CreateTask(ctx, api.CreateTaskRequest{TaskID: "w"})
	require.NoError(t, err)
	g, err = c.Claim(ctx, api.ClaimRequest{SessionID: "s1"})
	require.NoError(t, err)
	_, err = c.Wait(ctx, "w", api.WaitRequest{SessionID: "s1", Epoch: g.Lease.Epoch, Reason: "human"})
	require.NoError(t, err)
	task, err = c.Signal(ctx, "w", api.SignalRequest{Payload: []byte("yes")})
	require.NoError(t, err)
	require.Equal(t, lease.TaskPending, task.State)
	_, err = c.Signal(ctx, "w", api.SignalRequest{})
	require.ErrorIs(t, err, lease.ErrNotWaiting)
	_, err = c.Revoke(ctx, "w", api.RevokeRequest{})
	require.Error(t, err)
	task, err = c.Cancel(ctx, "w", api.CancelRequest{Reason: "done"})
	require.NoError(t, err)
	require.Equal(t, lease.TaskCancelled, task.State)

	_, err = c.Keys(ctx)
	require.NoError(t, err)
	st, err := c.Status(ctx)
	require.NoError(t, err)
	require.Equal(t, "Leader", st.State)
	require.NoError(t, c.Join(ctx, api.JoinRequest{ID: "n2", RaftAddr: "127.0.0.1:1"}))
	require.NoError(t, c.Remove(ctx, "n2"))

	require.NoError(t, c.CloseSession(ctx, "s1"))
	_, err = c.HeartbeatOnce(ctx, "s1", api.HeartbeatRequest{})
	require.ErrorIs(t, err, lease.ErrSessionNotFound)

	_, err = c.CreateTask(ctx, api.CreateTaskRequest{TaskID: "x", Profile: "nope"})
	require.ErrorIs(t, err, cluster.ErrBadRequest)
}

func TestRequestIDReusedAcrossRetries(t *testing.T) {
	st, c := single(t)
	ctx := context.Background()

	// Two answers that prove nothing was applied, then success: three
	// attempts, one request id.
	st.Inject("CreateTask", httpapitest.Fault{Err: raftstore.ErrNoLeader})
	st.Inject("CreateTask", httpapitest.Fault{Err: raftstore.ErrNoLeader})
	_, err := c.CreateTask(ctx, api.CreateTaskRequest{TaskID: "t1"})
	require.NoError(t, err)
	rids := st.CallsOf("CreateTask")
	require.Len(t, rids, 3)
	require.Equal(t, rids[0], rids[1])
	require.Equal(t, rids[0], rids[2])

	// Applied, but the answer was "timeout": the retry carries the same id,
	// the store de-duplicates, and the caller sees one success, not
	// task_exists.
	_, err = c.OpenSession(ctx, api.OpenSessionRequest{SessionID: "s", WorkerID: "w"})
	require.NoError(t, err)
	st.Inject("Acquire", httpapitest.Fault{Err: raftstore.ErrTimeout, Applied: true})
	g, err := c.Acquire(ctx, "t1", api.AcquireRequest{SessionID: "s"})
	require.NoError(t, err)
	rids = st.CallsOf("Acquire")
	require.Len(t, rids, 2)
	require.Equal(t, rids[0], rids[1])
	task, err := c.Task(ctx, "t1", false)
	require.NoError(t, err)
	require.Equal(t, uint64(1), task.Attempts, "granted once")
	require.Equal(t, g.Lease.Epoch, task.Lease.Epoch)

	// A caller-chosen request id is used as is.
	_, err = c.CreateTask(cluster.WithRequestID(ctx, "mine"), api.CreateTaskRequest{TaskID: "t2"})
	require.NoError(t, err)
	rids = st.CallsOf("CreateTask")
	require.Equal(t, "mine", rids[len(rids)-1])
	// ... and a new call gets a new one.
	_, err = c.CreateTask(ctx, api.CreateTaskRequest{TaskID: "t3"})
	require.NoError(t, err)
	rids = st.CallsOf("CreateTask")
	require.NotEqual(t, rids[len(rids)-2], rids[len(rids)-1])
}

func TestNoRetryAfterAnAnswer(t *testing.T) {
	st, c := single(t)
	for _, err := range []error{lease.ErrLeaseHeld, errors.New("bug"), raftstore.ErrInvalidArgument} {
		st.Inject("Claim", httpapitest.Fault{Err: err, Applied: true})
	}
	for range 3 {
		_, err := c.Claim(context.Background(), api.ClaimRequest{SessionID: "s"})
		require.Error(t, err)
	}
	require.Len(t, st.CallsOf("Claim"), 3, "one attempt per call")
}

func TestUnknownOutcomeIsNeverReportedAsUnavailable(t *testing.T) {
	st := httpapitest.New()
	// One store behind two members, so the round is not over (and the call
	// not given up as unanswered) after the first attempt.
	c := newClient(t, func(cfg *cluster.Config) { cfg.Timeout = 100 * time.Millisecond; cfg.Retries = 1 }, serve(t, st), serve(t, st))
	// First attempt outlives the client's attempt timeout (the store may
	// have applied it), the second is refused as unavailable.
	st.Inject("CreateTask", httpapitest.Fault{Delay: 300 * time.Millisecond})
	st.Inject("CreateTask", httpapitest.Fault{Err: raftstore.ErrNoLeader})
	_, err := c.CreateTask(context.Background(), api.CreateTaskRequest{TaskID: "t"})
	require.ErrorIs(t, err, cluster.ErrTimeout)
	require.ErrorIs(t, err, cluster.ErrUnavailable)
	require.Len(t, st.CallsOf("CreateTask"), 2)
}

func TestFailoverPastDeadEndpoint(t *testing.T) {
	st := httpapitest.New()
	live := serve(t, st)
	c := newClient(t, nil, deadAddr(t), live)
	ctx := context.Background()
	for i := range 3 {
		_, err := c.OpenSession(ctx, api.OpenSessionRequest{SessionID: "s", WorkerID: "w"})
		require.NoError(t, err, "call %d", i)
	}
	// A heartbeat falls over too: the dead member was never reached.
	c2 := newClient(t, nil, deadAddr(t), live)
	_, err := c2.HeartbeatOnce(ctx, "s", api.HeartbeatRequest{})
	require.NoError(t, err)
}

// A control call that no member answers fails after one round, naming
// every member's failure, long before its budget ends.
func TestAllEndpointsDownFailsFast(t *testing.T) {
	a, b := deadAddr(t), deadAddr(t)
	c := newClient(t, nil, a, b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err := c.CreateTask(ctx, api.CreateTaskRequest{TaskID: "t"})
	require.ErrorIs(t, err, cluster.ErrUnavailable)
	require.NotErrorIs(t, err, cluster.ErrTimeout, "a dial failure proves nothing was sent")
	require.Contains(t, err.Error(), "no member answered (2 tried)")
	require.Contains(t, err.Error(), a)
	require.Contains(t, err.Error(), b)
	require.Less(t, time.Since(start), 2*time.Second)
}

// A member that accepts connections but never answers (a paused process)
// costs each control call one AttemptTimeout, not the whole call budget.
func TestSilentMembersFailFastWithUnknownOutcome(t *testing.T) {
	st := httpapitest.New()
	c := newClient(t, func(cfg *cluster.Config) { cfg.AttemptTimeout = 150 * time.Millisecond }, serve(t, st), serve(t, st))
	st.Inject("Checkpoint", httpapitest.Fault{Delay: 2 * time.Second})
	st.Inject("Checkpoint", httpapitest.Fault{Delay: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err := c.Checkpoint(ctx, "t", api.CheckpointRequest{SessionID: "s", Epoch: 1, Seq: 1})
	require.ErrorIs(t, err, cluster.ErrTimeout, "the members may have applied it")
	require.Contains(t, err.Error(), "no member answered")
	require.Less(t, time.Since(start), 2*time.Second)
	require.Len(t, st.CallsOf("Checkpoint"), 2)
}

// While members answer (503 during an election) the call keeps trying.
func TestElectionIsRetriedWithinTheBudget(t *testing.T) {
	st := httpapitest.New()
	c := newClient(t, nil, serve(t, st), serve(t, st))
	for range 5 {
		st.Inject("CreateTask", httpapitest.Fault{Err: raftstore.ErrNoLeader})
	}
	_, err := c.CreateTask(context.Background(), api.CreateTaskRequest{TaskID: "t"})
	require.NoError(t, err)
	require.Len(t, st.CallsOf("CreateTask"), 6)

	// Retries bounds the call.
	c = newClient(t, func(cfg *cluster.Config) { cfg.Retries = 3 }, serve(t, st))
	for range 5 {
		st.Inject("Leases", httpapitest.Fault{Err: raftstore.ErrNoLeader})
	}
	_, err = c.Leases(context.Background(), false)
	require.ErrorIs(t, err, cluster.ErrUnavailable)
	require.Contains(t, err.Error(), "4 attempts")
}

// hbClient opens session "s" on a store served by two members and returns
// the store and a client that heartbeats through both.
func hbClient(t *testing.T) (*httpapitest.Store, *cluster.Client) {
	t.Helper()
	st := httpapitest.New()
	c := newClient(t, nil, serve(t, st), serve(t, st))
	_, err := c.OpenSession(context.Background(), api.OpenSessionRequest{SessionID: "s", WorkerID: "w"})
	require.NoError(t, err)
	return st, c
}

// heartbeat sends one heartbeat with a budget of one interval.
func heartbeat(c *cluster.Client, interval time.Duration) (api.HeartbeatResponse, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), interval)
	defer cancel()
	start := time.Now()
	hb, err := c.HeartbeatOnce(ctx, "s", api.HeartbeatRequest{})
	return hb, time.Since(start), err
}

// A member without a leader (or a deposed leader) answers 503 at once: the
// heartbeat moves to the next member and succeeds in the same interval.
func TestHeartbeatMovesOnAfterNoLeader(t *testing.T) {
	st, c := hbClient(t)
	st.Inject("Heartbeat", httpapitest.Fault{Err: raftstore.ErrNoLeader})
	st.Inject("Heartbeat", httpapitest.Fault{Err: raftstore.ErrNotLeader})
	_, _, err := heartbeat(c, 2*time.Second)
	require.NoError(t, err)
	rids := st.CallsOf("Heartbeat")
	require.Len(t, rids, 3)
	require.Equal(t, rids[0], rids[2], "one request id on every attempt")
}

// A member that takes the connection but does not answer (SIGSTOP) is
// hedged: the next member is asked after a quarter of the budget, and the
// heartbeat succeeds long before the budget ends.
func TestHeartbeatIsHedgedPastASilentMember(t *testing.T) {
	st, c := hbClient(t)
	st.Inject("Heartbeat", httpapitest.Fault{Delay: 1500 * time.Millisecond})
	const interval = time.Second
	_, took, err := heartbeat(c, interval)
	require.NoError(t, err)
	require.GreaterOrEqual(t, took, interval/4, "hedged, not sent twice at once")
	require.Less(t, took, interval*3/4)
}

// With every member silent, each attempt gives up after half the budget
// and the heartbeat fails when the budget ends, with an unknown outcome.
func TestHeartbeatGivesUpWhenTheBudgetEnds(t *testing.T) {
	st, c := hbClient(t)
	for range 6 {
		st.Inject("Heartbeat", httpapitest.Fault{Delay: time.Second})
	}
	const interval = 400 * time.Millisecond
	_, took, err := heartbeat(c, interval)
	require.ErrorIs(t, err, cluster.ErrTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, took, interval+time.Second)
	require.GreaterOrEqual(t, len(st.CallsOf("Heartbeat")), 3, "both members tried, the first again after its attempt timed out")
}

// A final answer ends the heartbeat: session not found is not retried.
func TestHeartbeatFinalAnswerIsNotRetried(t *testing.T) {
	st, c := hbClient(t)
	_, _, err := heartbeat(c, time.Second)
	require.NoError(t, err)
	before := len(st.CallsOf("Heartbeat"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = c.HeartbeatOnce(ctx, "nope", api.HeartbeatRequest{})
	require.ErrorIs(t, err, lease.ErrSessionNotFound)
	require.Len(t, st.CallsOf("Heartbeat"), before+1)
}

func TestFollowerEndpointForwards(t *testing.T) {
	leader := httpapitest.New()
	leaderAddr := serve(t, leader)
	follower := httpapitest.New()
	follower.SetFollower(true, leaderAddr)
	c := newClient(t, nil, serve(t, follower))
	ctx := context.Background()
	_, err := c.OpenSession(ctx, api.OpenSessionRequest{SessionID: "s", WorkerID: "w"})
	require.NoError(t, err)
	g, err := c.Acquire(ctx, "t", api.AcquireRequest{SessionID: "s", Create: true})
	require.NoError(t, err)
	require.Positive(t, g.Lease.Epoch)
	require.Len(t, leader.CallsOf("Acquire"), 1)
}

func TestReadyAndHealth(t *testing.T) {
	st := httpapitest.New()
	addr := serve(t, st)
	c := newClient(t, nil, addr)
	ctx := context.Background()
	require.NoError(t, c.Health(ctx, addr))
	require.NoError(t, c.Ready(ctx, "http://"+addr))
	st.SetReady(raftstore.ErrNotReady)
	require.ErrorIs(t, c.Ready(ctx, addr), cluster.ErrUnavailable)
	require.ErrorIs(t, c.Health(ctx, deadAddr(t)), cluster.ErrUnavailable)
	require.ErrorIs(t, c.Ready(ctx, "https://x:1"), cluster.ErrConfig)
}

func TestErrorIsMapsEveryModelCode(t *testing.T) {
	for _, s := range []error{lease.ErrInvalid, lease.ErrTaskNotFound, lease.ErrTaskExists,
		lease.ErrSessionNotFound, lease.ErrLeaseHeld, lease.ErrTaskWaiting, lease.ErrTaskFinal,
		lease.ErrNotClaimable, lease.ErrNoTask, lease.ErrStaleEpoch, lease.ErrNotHolder,
		lease.ErrLeaseNotActive, lease.ErrCheckpointSeq, lease.ErrNotWaiting, lease.ErrIntentsInFlight,
		lease.ErrInDoubt, lease.ErrJournalFull} {
		e := &cluster.Error{Status: 409, Problem: api.Problem{Code: lease.ErrorCode(s)}}
		require.ErrorIs(t, e, s)
		require.NotErrorIs(t, e, cluster.ErrUnavailable)
	}
	require.ErrorIs(t, &cluster.Error{Problem: api.Problem{Code: api.CodeUnknownOutcome}}, cluster.ErrTimeout)
	require.NotErrorIs(t, &cluster.Error{Problem: api.Problem{Code: "internal"}}, lease.ErrInvalid)
}

func TestConfig(t *testing.T) {
	bad := []cluster.Config{
		{},
		{Endpoints: []string{"localhost"}},
		{Endpoints: []string{"https://a:1"}},
		{Endpoints: []string{"http://a:1/path"}},
		{Endpoints: []string{"a:1"}, Timeout: -1},
	}
	for _, cfg := range bad {
		_, err := cluster.New(cfg)
		require.ErrorIs(t, err, cluster.ErrConfig, "%+v", cfg)
	}
	c, err := cluster.New(cluster.Config{Endpoints: []string{"127.0.0.1:1", "http://[::1]:2/"}})
	require.NoError(t, err)
	require.Equal(t, []string{"http://127.0.0.1:1", "http://[::1]:2"}, c.Endpoints())
}
