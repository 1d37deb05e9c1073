package cluster

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

// The console's calls (cmd/fencepost/console): reads for people, with
// nothing a reader's certificate cannot ask for.

// TaskSummary reads one task without its bodies (payload, checkpoint
// data, signal, result, journaled bodies), which a reader's certificate
// may not see; stale allows a read from the answering member's replica.
func (c *Client) TaskSummary(ctx context.Context, taskID string, stale bool) (*lease.Task, error) {
	var out lease.Task
	if err := c.do(ctx, request{method: http.MethodGet, path: taskPath(api.PathTask, taskID) + staleQuery(stale),
		out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// TaskHistory returns the answering member's recent events of a task,
// oldest first.
func (c *Client) TaskHistory(ctx context.Context, taskID string) (api.TaskHistory, error) {
	var out api.TaskHistory
	err := c.do(ctx, request{method: http.MethodGet, path: taskPath(api.PathTaskHistory, taskID), out: &out})
	return out, err
}

// WatchEvents long-polls the answering member for the events after since,
// waiting up to wait on the server (capped there at
// raftstore.MaxWatchWait). Like WatchSession it is one attempt; a caller
// whose answer says Reset, or that moved to another member, reads its
// state again.
func (c *Client) WatchEvents(ctx context.Context, since uint64, wait time.Duration) (api.EventFeed, error) {
	var out api.EventFeed
	q := url.Values{}
	q.Set(api.QueryWatchSince, strconv.FormatUint(since, 10))
	q.Set(api.QueryWatchTimeout, strconv.FormatInt(wait.Milliseconds(), 10))
	err := c.do(ctx, request{method: http.MethodGet, path: api.PathEvents + "?" + q.Encode(), out: &out,
		mode: modeOnce, wait: wait})
	return out, err
}

// Sessions lists open sessions after the session id after (at most limit
// per page, 0 for the cluster's maximum); a non-empty Next is the after
// of the next page.
func (c *Client) Sessions(ctx context.Context, after string, limit int) (api.SessionList, error) {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	p := api.PathSessions
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	var out api.SessionList
	err := c.do(ctx, request{method: http.MethodGet, path: p, out: &out})
	return out, err
}

// HTTPStatus is the status the cluster answered with, so a caller that
// shows pages (the console) can pass it on without knowing this type.
func (e *Error) HTTPStatus() int { return e.Status }
