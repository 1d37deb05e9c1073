package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

// The methods below mirror the store's API one to one, minus the request
// id (each call generates one, see WithRequestID). Mutations are
// de-duplicated by the cluster, so they follow the same retry rules as
// reads (retry.go); HeartbeatOnce (hedge.go), WatchSession, Ready and
// Health are the exceptions.

// expand fills a fence/api path template with path-escaped values, given as
// placeholder/value pairs.
func expand(tmpl string, kv ...string) string {
	for i := 0; i+1 < len(kv); i += 2 {
		tmpl = strings.Replace(tmpl, kv[i], url.PathEscape(kv[i+1]), 1)
	}
	return tmpl
}

func taskPath(tmpl, taskID string) string { return expand(tmpl, "{id}", taskID) }

func staleQuery(stale bool) string {
	if stale {
		return "?" + api.QueryStale + "=true"
	}
	return ""
}

// OpenSession opens (or, with a SessionID, idempotently re-opens) a session.
func (c *Client) OpenSession(ctx context.Context, req api.OpenSessionRequest) (api.Session, error) {
	var out api.Session
	err := c.do(ctx, request{method: http.MethodPost, path: api.PathSessions, body: req, out: &out})
	return out, err
}

// CloseSession closes a session; its active leases are given back.
func (c *Client) CloseSession(ctx context.Context, sessionID string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: expand(api.PathSession, "{sid}", sessionID)})
}

// HeartbeatOnce renews the session and every lease held through it: one
// logical heartbeat, which finds the leader whatever is wrong with the
// member the client talks to (hedge.go): its attempts are bounded by a
// share of the context's budget, hedged to a second member when slow, and
// moved to the next member after any failure, all under one request id.
// The sidecar owns heartbeat timing; its local deadline starts from the
// send time it records before calling, which no attempt precedes.
func (c *Client) HeartbeatOnce(ctx context.Context, sessionID string, req api.HeartbeatRequest) (api.HeartbeatResponse, error) {
	r := request{method: http.MethodPost, path: expand(api.PathHeartbeat, "{sid}", sessionID), mode: modeOnce, sid: sessionID}
	body, err := json.Marshal(req)
	if err != nil {
		return api.HeartbeatResponse{}, fmt.Errorf("cluster: encode %s %s: %w", r.method, r.path, err)
	}
	return c.heartbeat(ctx, r, requestID(ctx), body)
}

// CreateTask creates a pending task.
func (c *Client) CreateTask(ctx context.Context, req api.CreateTaskRequest) (*lease.Task, error) {
	var out lease.Task
	if err := c.do(ctx, request{method: http.MethodPost, path: api.PathTasks, body: req, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// Acquire grants the named task to a session.
func (c *Client) Acquire(ctx context.Context, taskID string, req api.AcquireRequest) (api.Grant, error) {
	var out api.Grant
	err := c.do(ctx, request{method: http.MethodPost, path: taskPath(api.PathAcquire, taskID), body: req, out: &out})
	return out, err
}

// Claim grants the most urgent claimable task; lease.ErrNoTask when none.
func (c *Client) Claim(ctx context.Context, req api.ClaimRequest) (api.Grant, error) {
	var out api.Grant
	err := c.do(ctx, request{method: http.MethodPost, path: api.PathClaim, body: req, out: &out})
	return out, err
}

// taskCall posts req to a task route and decodes the task it answers.
func (c *Client) taskCall(ctx context.Context, tmpl, taskID string, req any) (*lease.Task, error) {
	var out lease.Task
	if err := c.do(ctx, request{method: http.MethodPost, path: taskPath(tmpl, taskID), body: req, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// Checkpoint records progress under the caller's epoch.
func (c *Client) Checkpoint(ctx context.Context, taskID string, req api.CheckpointRequest) (*lease.Task, error) {
	return c.taskCall(ctx, api.PathCheckpoint, taskID, req)
}

// Wait closes the lease and parks the task until a signal or its timeout.
func (c *Client) Wait(ctx context.Context, taskID string, req api.WaitRequest) (*lease.Task, error) {
	return c.taskCall(ctx, api.PathWait, taskID, req)
}

// Signal wakes a waiting task.
func (c *Client) Signal(ctx context.Context, taskID string, req api.SignalRequest) (*lease.Task, error) {
	return c.taskCall(ctx, api.PathSignal, taskID, req)
}

// Release ends the caller's lease as completed, failed or given back.
func (c *Client) Release(ctx context.Context, taskID string, req api.ReleaseRequest) (*lease.Task, error) {
	return c.taskCall(ctx, api.PathRelease, taskID, req)
}

// Revoke takes a task's lease away (operator).
func (c *Client) Revoke(ctx context.Context, taskID string, req api.RevokeRequest) (*lease.Task, error) {
	return c.taskCall(ctx, api.PathRevoke, taskID, req)
}

// Cancel cancels a task for good.
func (c *Client) Cancel(ctx context.Context, taskID string, req api.CancelRequest) (*lease.Task, error) {
	return c.taskCall(ctx, api.PathCancel, taskID, req)
}

// DeleteTask deletes a final task.
func (c *Client) DeleteTask(ctx context.Context, taskID string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: taskPath(api.PathTask, taskID)})
}

// Intent journals a write before it is made; Replay in the answer means
// the recorded outcome stands in for the call.
func (c *Client) Intent(ctx context.Context, taskID string, req api.IntentRequest) (api.IntentResponse, error) {
	var out api.IntentResponse
	err := c.do(ctx, request{method: http.MethodPost, path: taskPath(api.PathIntent, taskID), body: req, out: &out})
	return out, err
}

// Outcome records what a journaled write returned.
func (c *Client) Outcome(ctx context.Context, taskID, key string, req api.OutcomeRequest) (lease.Effect, error) {
	var out lease.Effect
	err := c.do(ctx, request{method: http.MethodPost, path: expand(api.PathOutcome, "{id}", taskID, "{key}", key),
		body: req, out: &out})
	return out, err
}

// Task reads one task; stale allows a read from the answering member's
// replica without the linearizable round.
// It asks for the task's bodies (payload, checkpoint data, ...), which
// need the read.bodies permission; Tasks lists without them.
func (c *Client) Task(ctx context.Context, taskID string, stale bool) (*lease.Task, error) {
	var out lease.Task
	q := "?" + api.QueryBodies + "=true"
	if stale {
		q += "&" + api.QueryStale + "=true"
	}
	if err := c.do(ctx, request{method: http.MethodGet, path: taskPath(api.PathTask, taskID) + q,
		out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// Tasks lists tasks matching f; a non-empty Next in the answer is the
// After of the next page.
func (c *Client) Tasks(ctx context.Context, f lease.TaskFilter, stale bool) (api.TaskList, error) {
	q := url.Values{}
	if f.State != "" {
		q.Set("state", string(f.State))
	}
	if f.Status != "" {
		q.Set("status", string(f.Status))
	}
	if f.After != "" {
		q.Set("after", f.After)
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if stale {
		q.Set(api.QueryStale, "true")
	}
	p := api.PathTasks
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	var out api.TaskList
	err := c.do(ctx, request{method: http.MethodGet, path: p, out: &out})
	return out, err
}

// Leases lists every live lease, following the pages of GET /v1/leases
// (LeasesPage is one page).
func (c *Client) Leases(ctx context.Context, stale bool) (api.LeaseList, error) {
	all := api.LeaseList{Leases: []lease.Lease{}}
	p := api.LeasePage{}
	for {
		page, err := c.LeasesPage(ctx, p, stale)
		if err != nil {
			return api.LeaseList{}, err
		}
		all.Leases = append(all.Leases, page.Leases...)
		if page.Next == "" || page.Next <= p.After {
			return all, nil
		}
		p.After = page.Next
	}
}

// LeasesPage lists one page of the live leases: those of tasks after
// p.After; a non-empty Next is the After of the next page.
func (c *Client) LeasesPage(ctx context.Context, p api.LeasePage, stale bool) (api.LeaseList, error) {
	q := url.Values{}
	if stale {
		q.Set(api.QueryStale, "true")
	}
	if p.After != "" {
		q.Set("after", p.After)
	}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	path := api.PathLeases
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out api.LeaseList
	err := c.do(ctx, request{method: http.MethodGet, path: path, out: &out})
	return out, err
}

// Keys returns the cluster's token-signing public keys.
func (c *Client) Keys(ctx context.Context) (api.KeyList, error) {
	var out api.KeyList
	err := c.do(ctx, request{method: http.MethodGet, path: api.PathKeys, out: &out})
	return out, err
}

// Status returns the answering member's view of the cluster.
func (c *Client) Status(ctx context.Context) (api.ClusterStatus, error) {
	var out api.ClusterStatus
	err := c.do(ctx, request{method: http.MethodGet, path: api.PathCluster, out: &out})
	return out, err
}

// MemberStatus asks one member (host:port or http://host:port) for its own
// view of the cluster, in one attempt: the question is about that member,
// so there is no failover (ctl status asks every member this way).
func (c *Client) MemberStatus(ctx context.Context, endpoint string) (api.ClusterStatus, error) {
	var out api.ClusterStatus
	err := c.do(ctx, request{method: http.MethodGet, path: api.PathCluster, out: &out, mode: modeFixed, endpoint: endpoint})
	return out, err
}

// Join adds a voter (idempotent).
func (c *Client) Join(ctx context.Context, req api.JoinRequest) error {
	return c.do(ctx, request{method: http.MethodPost, path: api.PathClusterJoin, body: req})
}

// Remove removes a voter.
func (c *Client) Remove(ctx context.Context, id string) error {
	return c.do(ctx, request{method: http.MethodPost, path: api.PathClusterRemove, body: api.RemoveRequest{ID: id}})
}

// Ready asks one member (host:port or http://host:port) whether it is
// ready: nil, or an *Error matching ErrUnavailable. One attempt, no
// failover: the question is about that member.
func (c *Client) Ready(ctx context.Context, endpoint string) error {
	return c.do(ctx, request{method: http.MethodGet, path: api.PathReady, mode: modeFixed, endpoint: endpoint})
}

// Health asks one member whether its process is alive. One attempt.
func (c *Client) Health(ctx context.Context, endpoint string) error {
	return c.do(ctx, request{method: http.MethodGet, path: api.PathHealth, mode: modeFixed, endpoint: endpoint})
}

// WatchSession long-polls the answering member for a change to the leases
// of session sessionID after version since, waiting up to wait on the
// server (which caps it, see raftstore.MaxWatchWait). It is one attempt,
// like HeartbeatOnce. The version is only a nudge: on a change the caller
// heartbeats at once and acts on that reply.
func (c *Client) WatchSession(ctx context.Context, sessionID string, since uint64, wait time.Duration) (uint64, error) {
	var out api.WatchResponse
	q := url.Values{}
	q.Set(api.QueryWatchSince, strconv.FormatUint(since, 10))
	q.Set(api.QueryWatchTimeout, strconv.FormatInt(wait.Milliseconds(), 10))
	err := c.do(ctx, request{method: http.MethodGet, path: expand(api.PathWatch, "{sid}", sessionID) + "?" + q.Encode(),
		out: &out, mode: modeOnce, wait: wait})
	return out.Version, err
}
