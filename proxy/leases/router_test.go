package leases

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/proxytest"
)

// taskCluster is the fake cluster with a task table: an acquire without
// create of a task it does not have is task_not_found, a claim finds
// only what was put up for claiming, and down fails every call.
type taskCluster struct {
	*proxytest.Cluster
	mu        sync.Mutex
	tasks     map[string]bool
	claimable []string
	down      error
}

func newTaskCluster() *taskCluster {
	return &taskCluster{Cluster: proxytest.NewCluster(), tasks: map[string]bool{}}
}

func (c *taskCluster) Acquire(ctx context.Context, taskID string, req api.AcquireRequest) (api.Grant, error) {
	c.mu.Lock()
	if c.down != nil {
		c.mu.Unlock()
		return api.Grant{}, c.down
	}
	if !c.tasks[taskID] && !req.Create {
		c.mu.Unlock()
		return api.Grant{}, lease.ErrTaskNotFound
	}
	c.tasks[taskID] = true
	c.mu.Unlock()
	return c.Cluster.Acquire(ctx, taskID, req)
}

func (c *taskCluster) Claim(ctx context.Context, req api.ClaimRequest) (api.Grant, error) {
	c.mu.Lock()
	if len(c.claimable) == 0 {
		c.mu.Unlock()
		return api.Grant{}, lease.ErrNoTask
	}
	id := c.claimable[0]
	c.claimable = c.claimable[1:]
	c.tasks[id] = true
	c.mu.Unlock()
	return c.Cluster.Acquire(ctx, id, api.AcquireRequest{SessionID: req.SessionID})
}

func (c *taskCluster) has(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tasks[id]
}

// testRouter builds a router over three fake clusters x, y, z whose rank
// puts owner[task] first (x when unlisted), with every session open.
func testRouter(t *testing.T, owner map[string]string) (*Router, map[string]*taskCluster) {
	t.Helper()
	fakes := map[string]*taskCluster{}
	var ms []Member
	for _, n := range []string{"x", "y", "z"} {
		fakes[n] = newTaskCluster()
		ms = append(ms, Member{Name: n, Cluster: fakes[n], Settings: Settings{
			WorkerID: "w1", SessionHeartbeat: time.Second, ClusterTimeout: time.Second,
			Logger: zap.NewNop(), Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"cluster": n}, prometheus.NewRegistry()),
			Clock: proxytest.NewClock(),
		}})
	}
	rank := func(names []string, task string) []string {
		first := owner[task]
		if first == "" {
			first = "x"
		}
		out := []string{first}
		for _, n := range names {
			if n != first {
				out = append(out, n)
			}
		}
		return out
	}
	r, err := NewRouter(ms, rank)
	require.NoError(t, err)
	for _, k := range r.order {
		require.NoError(t, k.openSession(t.Context()))
	}
	return r, fakes
}

// A new task is created in its owner, and only there; a task another
// cluster already has is acquired where it is, and every later call
// about it (check, session, client) goes there.
func TestRouterCreatesInTheOwnerAndKeepsExistingTasksWhereTheyAre(t *testing.T) {
	r, fakes := testRouter(t, map[string]string{"new": "y", "old": "x"})
	_, err := r.Acquire(t.Context(), "new", false, api.AcquireRequest{Create: true})
	require.NoError(t, err)
	require.True(t, fakes["y"].has("new"))
	require.False(t, fakes["x"].has("new") || fakes["z"].has("new"), "created in its owner only")

	fakes["z"].tasks["old"] = true // made before x was added, say
	_, err = r.Acquire(t.Context(), "old", false, api.AcquireRequest{Create: true})
	require.NoError(t, err)
	require.False(t, fakes["x"].has("old"), "not created again in the owner")
	_, why := r.Check("old")
	require.Equal(t, Reason(""), why)
	require.Equal(t, r.keepers["z"].SessionID(), r.SessionFor("old"))
	require.Same(t, fakes["z"], r.ClusterFor("old"))
	require.Equal(t, "z", r.ClusterName("old"))
	require.Equal(t, []string{"new", "old"}, r.TaskIDs())
	require.Len(t, r.Views(), 2)
}

// A cluster that cannot be asked stops the creation of a task it might
// hold; the owner's own tasks are not affected by another being down.
func TestRouterRefusesToCreateWhileACandidateIsDown(t *testing.T) {
	r, fakes := testRouter(t, map[string]string{"t": "x"})
	fakes["z"].down = errors.New("connection refused")
	_, err := r.Acquire(t.Context(), "t", false, api.AcquireRequest{Create: true})
	require.ErrorContains(t, err, "cluster z")
	require.False(t, fakes["x"].has("t"))
	fakes["x"].tasks["t"] = true
	_, err = r.Acquire(t.Context(), "t", false, api.AcquireRequest{Create: true})
	require.NoError(t, err, "a task its owner has never asks the others")
}

// Without a task id: a claim asks every cluster until one has work (no
// claimable task only when none has); the only lease held, across all
// clusters, is resolved, and two are ambiguous.
func TestRouterClaimAndTheOnlyLease(t *testing.T) {
	r, fakes := testRouter(t, nil)
	_, err := r.Acquire(t.Context(), "", true, api.AcquireRequest{})
	require.ErrorIs(t, err, lease.ErrNoTask)
	fakes["z"].claimable = []string{"c1"}
	g, err := r.Acquire(t.Context(), "", true, api.AcquireRequest{})
	require.NoError(t, err)
	require.Equal(t, "c1", g.Lease.TaskID)
	task, _, err := r.Resolve("")
	require.NoError(t, err)
	require.Equal(t, "c1", task)
	fakes["y"].claimable = []string{"c2"}
	_, err = r.Acquire(t.Context(), "", true, api.AcquireRequest{})
	require.NoError(t, err)
	_, _, err = r.Resolve("")
	require.ErrorIs(t, err, ErrAmbiguousTask)
	_, why := r.Check("")
	require.Equal(t, ReasonAmbig, why)
	require.True(t, slices.Equal([]string{"c1", "c2"}, r.TaskIDs()))
}
