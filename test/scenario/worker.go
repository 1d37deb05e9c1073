package scenario

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy"
)

// Worker is the agent side of one worker: it drives its sidecar's control
// API and makes its tool calls through the sidecar as HTTP_PROXY, like
// any program with HTTP_PROXY set would.
type Worker struct {
	// Name labels the worker in the timeline ("A", "B").
	Name string
	// Control is the sidecar's control address.
	Control string

	ctl  *http.Client
	tool *http.Client
}

// NewWorker returns a worker behind the sidecar whose proxy and control
// addresses are given.
func NewWorker(name, proxyAddr, controlAddr string) *Worker {
	pu := &url.URL{Scheme: "http", Host: proxyAddr}
	return &Worker{
		Name:    name,
		Control: controlAddr,
		ctl:     &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}},
		tool: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			Proxy: http.ProxyURL(pu), MaxIdleConnsPerHost: 4, DisableCompression: true,
		}},
	}
}

// Close drops the worker's idle connections.
func (w *Worker) Close() {
	w.ctl.CloseIdleConnections()
	w.tool.CloseIdleConnections()
}

// ProblemError is a problem+json answer.
type ProblemError struct {
	// Status is the HTTP status.
	Status int
	// Problem is the decoded problem document.
	Problem api.Problem
}

// Error formats the status, code and detail.
func (e *ProblemError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Problem.Code, e.Problem.Detail)
}

// call POSTs (or GETs when in is nil and method is GET) JSON to the
// control API and decodes the reply into out.
func (w *Worker) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+w.Control+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.ctl.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		pe := &ProblemError{Status: resp.StatusCode}
		if json.Unmarshal(b, &pe.Problem) != nil {
			pe.Problem.Detail = strings.TrimSpace(string(b))
		}
		return pe
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// Acquire acquires task through the sidecar, creating it when missing.
func (w *Worker) Acquire(ctx context.Context, task string) (proxy.GrantReply, error) {
	var g proxy.GrantReply
	err := w.call(ctx, http.MethodPost, proxy.PathAcquire, proxy.AcquireRequest{TaskID: task, Create: true, Profile: ProfileName}, &g)
	return g, err
}

// Claim claims the most urgent claimable task.
func (w *Worker) Claim(ctx context.Context) (proxy.GrantReply, error) {
	var g proxy.GrantReply
	err := w.call(ctx, http.MethodPost, proxy.PathClaim, struct{}{}, &g)
	return g, err
}

// Checkpoint records progress of task.
func (w *Worker) Checkpoint(ctx context.Context, task, step string, data []byte) error {
	return w.call(ctx, http.MethodPost, proxy.PathCheckpoint, proxy.CheckpointRequest{TaskID: task, Step: step, Data: data}, nil)
}

// CheckpointSeq records progress of task at seq and returns the task as
// the cluster stored it (its Checkpoint is the one acknowledged).
func (w *Worker) CheckpointSeq(ctx context.Context, task string, seq uint64, step string, data []byte) (*lease.Task, error) {
	var t lease.Task
	err := w.call(ctx, http.MethodPost, proxy.PathCheckpoint, proxy.CheckpointRequest{TaskID: task, Seq: seq, Step: step, Data: data}, &t)
	return &t, err
}

// Complete completes task.
func (w *Worker) Complete(ctx context.Context, task string) error {
	return w.call(ctx, http.MethodPost, proxy.PathComplete, proxy.ReleaseRequest{TaskID: task}, nil)
}

// GiveBack gives task back unfinished, so another worker may take it at
// once.
func (w *Worker) GiveBack(ctx context.Context, task, reason string) error {
	return w.call(ctx, http.MethodPost, proxy.PathGiveBack, proxy.ReleaseRequest{TaskID: task, Reason: reason}, nil)
}

// Lease returns the sidecar's local view of task's lease (zero when it
// holds none).
func (w *Worker) Lease(ctx context.Context, task string) (proxy.LeaseView, error) {
	var r proxy.LeaseReply
	if err := w.call(ctx, http.MethodGet, proxy.PathLease+"?taskId="+url.QueryEscape(task), nil, &r); err != nil {
		return proxy.LeaseView{}, err
	}
	for _, v := range r.Leases {
		if v.TaskID == task {
			return v, nil
		}
	}
	return proxy.LeaseView{}, nil
}

// Events streams the sidecar's lease events (GET /v1/events, Server-Sent
// Events) into fn until ctx ends. It returns once the stream is open, or
// with the error that kept it from opening; done is closed when the
// stream has ended.
func (w *Worker) Events(ctx context.Context, fn func(proxy.Event)) (done <-chan struct{}, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+w.Control+proxy.PathEvents, nil)
	if err != nil {
		return nil, err
	}
	c := &http.Client{Transport: &http.Transport{Proxy: nil}}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("events: %s", resp.Status)
	}
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		defer c.CloseIdleConnections()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				var ev proxy.Event
				if json.Unmarshal([]byte(data), &ev) == nil {
					fn(ev)
				}
			}
		}
	}()
	return ch, nil
}

// WriteOutcome classifies the answer to one write.
type WriteOutcome string

// Write outcomes.
const (
	// Accepted: the downstream took the write (2xx).
	Accepted WriteOutcome = "accepted"
	// BlockedBySidecar: the sidecar refused it; it never left.
	BlockedBySidecar WriteOutcome = "blocked_by_sidecar"
	// CutInFlight: the sidecar had forwarded it and cut it when the lease
	// was lost; it may still reach the downstream.
	CutInFlight WriteOutcome = "cut_in_flight"
	// RejectedStale: the downstream refused a stale fencing token.
	RejectedStale WriteOutcome = "rejected_stale"
	// Failed: anything else (network error, other status).
	Failed WriteOutcome = "failed"
)

// WriteResult is one write as the worker saw it.
type WriteResult struct {
	// Outcome classifies the answer.
	Outcome WriteOutcome
	// Status is the HTTP status (0 when there was no answer).
	Status int
	// Code is the problem code (sidecar) or the type's tail (downstream).
	Code string
	// Sent is when the worker sent the write; Done when it had its answer.
	Sent, Done time.Time
	// Err is the transport error or the unexpected answer, for Failed.
	Err error
	// Replayed is true when the downstream answered from its idempotency
	// store (Idempotent-Replayed: true) instead of running the write.
	Replayed bool
}

// Write POSTs a tool call to target (a URL) through the sidecar, with
// actionID as the worker's stable id of the action (the sidecar derives
// the Idempotency-Key from it).
func (w *Worker) Write(ctx context.Context, target, task, actionID string, body []byte) WriteResult {
	return w.write(ctx, target, task, proxy.HeaderActionID, actionID, body)
}

// WriteKey is Write with the worker's own Idempotency-Key, which the
// sidecar passes on unchanged (so the downstream's log can be matched to
// the worker's writes).
func (w *Worker) WriteKey(ctx context.Context, target, task, key string, body []byte) WriteResult {
	return w.write(ctx, target, task, "Idempotency-Key", key, body)
}

func (w *Worker) write(ctx context.Context, target, task, header, value string, body []byte) (res WriteResult) {
	res.Sent = time.Now()
	defer func() { res.Done = time.Now() }()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		res.Outcome, res.Err = Failed, err
		return res
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(proxy.HeaderTaskSelect, task)
	req.Header.Set(header, value)
	resp, err := w.tool.Do(req)
	if err != nil {
		res.Outcome, res.Err = Failed, err
		return res
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	res.Status = resp.StatusCode
	res.Replayed = resp.Header.Get(fence.HeaderReplayed) == "true"
	if resp.StatusCode/100 == 2 {
		res.Outcome = Accepted
		return res
	}
	var p api.Problem
	_ = json.Unmarshal(b, &p)
	res.Code = p.Code
	if res.Code == "" {
		res.Code = p.Type[strings.LastIndexByte(p.Type, '/')+1:]
	}
	switch {
	case res.Code == proxy.CodeLeaseLostMid:
		res.Outcome = CutInFlight
	case isSidecarBlock(res.Code):
		res.Outcome = BlockedBySidecar
	case res.Code == "stale-token":
		res.Outcome = RejectedStale
	default:
		res.Outcome = Failed
		res.Err = errors.New(strings.TrimSpace(string(b)))
	}
	return res
}

// isSidecarBlock reports whether code is one of the sidecar's "no current
// lease" refusals.
func isSidecarBlock(code string) bool {
	switch code {
	case proxy.CodeLeaseExpired, proxy.CodeLeaseSuspect, proxy.CodeLeaseRevoked, proxy.CodeLeaseWaiting, proxy.CodeNoLease:
		return true
	}
	return false
}
