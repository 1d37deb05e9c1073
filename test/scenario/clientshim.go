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

// httpCluster is a minimal client of the cluster API that satisfies
// proxy.Cluster: it tries each endpoint in turn with one request id per
// call (the cluster de-duplicates), and maps problem codes back to the
// lease sentinels.
type httpCluster struct {
	endpoints []string
	c         *http.Client
	mu        sync.Mutex
	next      int
}

func newHTTPCluster(endpoints []string, timeout time.Duration) *httpCluster {
	return &httpCluster{endpoints: endpoints, c: &http.Client{Timeout: timeout, Transport: &http.Transport{Proxy: nil}}}
}

func (h *httpCluster) close() { h.c.CloseIdleConnections() }

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

func (h *httpCluster) do(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	rid := newRID()
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
		if resp.StatusCode == http.StatusServiceUnavailable {
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
		last = errors.New("cluster: no endpoints")
	}
	return last
}

func esc(s string) string { return url.PathEscape(s) }

func (h *httpCluster) OpenSession(ctx context.Context, req api.OpenSessionRequest) (api.Session, error) {
	var s api.Session
	err := h.do(ctx, http.MethodPost, api.PathSessions, req, &s)
	return s, err
}

func (h *httpCluster) CloseSession(ctx context.Context, sid string) error {
	return h.do(ctx, http.MethodDelete, "/v1/sessions/"+esc(sid), nil, nil)
}

func (h *httpCluster) HeartbeatOnce(ctx context.Context, sid string, req api.HeartbeatRequest) (api.HeartbeatResponse, error) {
	var r api.HeartbeatResponse
	err := h.do(ctx, http.MethodPost, "/v1/sessions/"+esc(sid)+"/heartbeat", req, &r)
	return r, err
}

func (h *httpCluster) Acquire(ctx context.Context, taskID string, req api.AcquireRequest) (api.Grant, error) {
	var g api.Grant
	err := h.do(ctx, http.MethodPost, "/v1/tasks/"+esc(taskID)+"/acquire", req, &g)
	return g, err
}

func (h *httpCluster) Claim(ctx context.Context, req api.ClaimRequest) (api.Grant, error) {
	var g api.Grant
	err := h.do(ctx, http.MethodPost, api.PathClaim, req, &g)
	return g, err
}

func (h *httpCluster) task(ctx context.Context, taskID, op string, req any) (*lease.Task, error) {
	var t lease.Task
	if err := h.do(ctx, http.MethodPost, "/v1/tasks/"+esc(taskID)+"/"+op, req, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

func (h *httpCluster) Checkpoint(ctx context.Context, taskID string, req api.CheckpointRequest) (*lease.Task, error) {
	return h.task(ctx, taskID, "checkpoint", req)
}

func (h *httpCluster) Wait(ctx context.Context, taskID string, req api.WaitRequest) (*lease.Task, error) {
	return h.task(ctx, taskID, "wait", req)
}

func (h *httpCluster) Release(ctx context.Context, taskID string, req api.ReleaseRequest) (*lease.Task, error) {
	return h.task(ctx, taskID, "release", req)
}

// newClusterClient returns the client a sidecar uses to reach endpoints,
// and a function that releases it.
func newClusterClient(endpoints []string, timeout time.Duration) (*httpCluster, func(), error) {
	h := newHTTPCluster(endpoints, timeout)
	return h, h.close, nil
}
