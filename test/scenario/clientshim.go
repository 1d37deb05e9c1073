package scenario

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

// ClusterClient is a minimal client of the cluster API that satisfies
// proxy.Cluster, for the scenario's sidecars and the fault tests: it tries
// each endpoint in turn with one request id per call (the cluster
// de-duplicates, so a retry after an unknown outcome has its effect once),
// and maps problem codes back to the lease sentinels so errors.Is works.
type ClusterClient struct {
	// Retry, when positive, keeps retrying a call that reached no leader
	// (network errors, 503, 504) with the same request id for that long,
	// so its outcome becomes known instead of staying in doubt.
	Retry time.Duration

	endpoints []string
	c         *http.Client
	mu        sync.Mutex
	next      int
}

// NewClusterClient returns a client of the cluster at endpoints whose
// every HTTP attempt is bounded by timeout.
func NewClusterClient(endpoints []string, timeout time.Duration) *ClusterClient {
	return &ClusterClient{endpoints: endpoints, c: &http.Client{Timeout: timeout, Transport: &http.Transport{Proxy: nil}}}
}

// Close drops idle connections.
func (h *ClusterClient) Close() { h.c.CloseIdleConnections() }

var modelErrs = []error{
	lease.ErrInvalid, lease.ErrTaskNotFound, lease.ErrTaskExists, lease.ErrSessionNotFound, lease.ErrLeaseHeld,
	lease.ErrTaskWaiting, lease.ErrTaskFinal, lease.ErrNotClaimable, lease.ErrNoTask, lease.ErrStaleEpoch,
	lease.ErrNotHolder, lease.ErrLeaseNotActive, lease.ErrCheckpointSeq, lease.ErrNotWaiting,
	lease.ErrIntentsInFlight, lease.ErrInDoubt, lease.ErrJournalFull,
}

func newRID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (h *ClusterClient) do(ctx context.Context, method, path string, in, out any) error {
	rid := newRID()
	deadline := time.Now().Add(h.Retry)
	for {
		err := h.once(ctx, rid, method, path, in, out)
		var ue *unreachableError
		if err == nil || !errors.As(err, &ue) || h.Retry <= 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// unreachableError means no endpoint gave a definite answer.
type unreachableError struct{ err error }

func (e *unreachableError) Error() string { return "cluster unreachable: " + e.err.Error() }
func (e *unreachableError) Unwrap() error { return e.err }

func (h *ClusterClient) once(ctx context.Context, rid, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	h.mu.Lock()
	start := h.next
	h.mu.Unlock()
	var last error
	for i := range h.endpoints {
		idx := (start + i) % len(h.endpoints)
		req, err := http.NewRequestWithContext(ctx, method, "http://"+h.endpoints[idx]+path, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(api.HeaderRequestID, rid)
		resp, err := h.c.Do(req)
		if err != nil {
			last = err
			if ctx.Err() != nil {
				return err
			}
			continue
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
		resp.Body.Close()
		if err != nil {
			last = err
			continue
		}
		if resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusGatewayTimeout {
			last = fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
			continue
		}
		h.mu.Lock()
		h.next = idx
		h.mu.Unlock()
		if resp.StatusCode/100 != 2 {
			var p api.Problem
			_ = json.Unmarshal(b, &p)
			for _, e := range modelErrs {
				if lease.ErrorCode(e) == p.Code {
					return fmt.Errorf("%w: %s", e, p.Detail)
				}
			}
			return fmt.Errorf("cluster: %s: %s", resp.Status, strings.TrimSpace(string(b)))
		}
		if out != nil {
			return json.Unmarshal(b, out)
		}
		return nil
	}
	if last == nil {
		last = errors.New("no endpoints")
	}
	return &unreachableError{last}
}

func esc(s string) string { return url.PathEscape(s) }

// OpenSession opens a session for a worker.
func (h *ClusterClient) OpenSession(ctx context.Context, req api.OpenSessionRequest) (api.Session, error) {
	var s api.Session
	err := h.do(ctx, http.MethodPost, api.PathSessions, req, &s)
	return s, err
}

// CloseSession closes a session.
func (h *ClusterClient) CloseSession(ctx context.Context, sid string) error {
	return h.do(ctx, http.MethodDelete, "/v1/sessions/"+esc(sid), nil, nil)
}

// HeartbeatOnce renews a session and its leases.
func (h *ClusterClient) HeartbeatOnce(ctx context.Context, sid string, req api.HeartbeatRequest) (api.HeartbeatResponse, error) {
	var r api.HeartbeatResponse
	err := h.do(ctx, http.MethodPost, "/v1/sessions/"+esc(sid)+"/heartbeat", req, &r)
	return r, err
}

// Acquire grants taskID to a session.
func (h *ClusterClient) Acquire(ctx context.Context, taskID string, req api.AcquireRequest) (api.Grant, error) {
	var g api.Grant
	err := h.do(ctx, http.MethodPost, "/v1/tasks/"+esc(taskID)+"/acquire", req, &g)
	return g, err
}

// Claim grants the most urgent claimable task to a session.
func (h *ClusterClient) Claim(ctx context.Context, req api.ClaimRequest) (api.Grant, error) {
	var g api.Grant
	err := h.do(ctx, http.MethodPost, api.PathClaim, req, &g)
	return g, err
}

func (h *ClusterClient) task(ctx context.Context, taskID, op string, req any) (*lease.Task, error) {
	var t lease.Task
	if err := h.do(ctx, http.MethodPost, "/v1/tasks/"+esc(taskID)+"/"+op, req, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// Checkpoint records progress under an epoch.
func (h *ClusterClient) Checkpoint(ctx context.Context, taskID string, req api.CheckpointRequest) (*lease.Task, error) {
	return h.task(ctx, taskID, "checkpoint", req)
}

// Wait parks a task.
func (h *ClusterClient) Wait(ctx context.Context, taskID string, req api.WaitRequest) (*lease.Task, error) {
	return h.task(ctx, taskID, "wait", req)
}

// Release ends a lease.
func (h *ClusterClient) Release(ctx context.Context, taskID string, req api.ReleaseRequest) (*lease.Task, error) {
	return h.task(ctx, taskID, "release", req)
}

// Revoke takes a task's lease away (operator).
func (h *ClusterClient) Revoke(ctx context.Context, taskID string, req api.RevokeRequest) (*lease.Task, error) {
	return h.task(ctx, taskID, "revoke", req)
}

// Task reads a task (linearizable).
func (h *ClusterClient) Task(ctx context.Context, taskID string) (*lease.Task, error) {
	var t lease.Task
	if err := h.do(ctx, http.MethodGet, "/v1/tasks/"+esc(taskID), nil, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// newClusterClient returns the client a sidecar uses to reach endpoints,
// and a function that releases it.
func newClusterClient(endpoints []string, timeout time.Duration) (*ClusterClient, func(), error) {
	h := NewClusterClient(endpoints, timeout)
	return h, h.Close, nil
}
