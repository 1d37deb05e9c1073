package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// DefaultControlURL is the sidecar's control API when
// FENCEPOST_CONTROL_URL is not set (the sidecar's default control_addr).
const DefaultControlURL = "http://127.0.0.1:7481"

// Environment variables `fencepost run` gives a worker (the contract's
// "Environment" section).
const (
	EnvControlURL = "FENCEPOST_CONTROL_URL"
	EnvTask       = "FENCEPOST_TASK"
	EnvEpoch      = "FENCEPOST_EPOCH"
	EnvCheckpoint = "FENCEPOST_CHECKPOINT"
)

// callTimeout bounds one control call; the sidecar's own cluster timeout
// is shorter, so a call that takes this long means the sidecar is stuck.
const callTimeout = 30 * time.Second

// ErrNoTaskInEnv is returned by RunCurrent when neither FENCEPOST_TASK
// nor the sidecar's lease view names exactly one task.
var ErrNoTaskInEnv = errors.New("fencepost: one-task mode: FENCEPOST_TASK is not set and the sidecar does not hold exactly one lease")

// Client calls one sidecar's control API. The zero value is not usable;
// make one with NewClient or FromEnv. It is safe for concurrent use.
type Client struct {
	base string
	hc   *http.Client
}

// NewClient returns a client of the control API at baseURL
// (http://127.0.0.1:7481). Its requests never use a proxy, whatever
// HTTP_PROXY says: control calls are not tool calls.
func NewClient(baseURL string) *Client {
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 8, IdleConnTimeout: 30 * time.Second}
	return &Client{base: strings.TrimRight(baseURL, "/"), hc: &http.Client{Transport: tr}}
}

// FromEnv returns a client of FENCEPOST_CONTROL_URL, or of
// DefaultControlURL when it is not set.
func FromEnv() *Client {
	if u := os.Getenv(EnvControlURL); u != "" {
		return NewClient(u)
	}
	return NewClient(DefaultControlURL)
}

// LeaseView is the sidecar's view of one held lease (GET /v1/lease).
type LeaseView struct {
	TaskID         string `json:"taskId"`
	Epoch          uint64 `json:"epoch"`
	Status         string `json:"status"`
	Current        bool   `json:"current"`
	RemainingMs    int64  `json:"remainingMs"`
	CheckpointSeq  uint64 `json:"checkpointSeq"`
	CheckpointStep string `json:"checkpointStep,omitempty"`
}

// grant is the reply to acquire and claim.
type grant struct {
	Lease LeaseView `json:"lease"`
	Task  struct {
		ID     string `json:"taskId"`
		Signal []byte `json:"signal"`
	} `json:"task"`
	CheckpointData json.RawMessage `json:"checkpointData"`
}

// call POSTs (body != nil) or GETs path and decodes a 2xx reply into out
// (when not nil); a refusal is an *Error.
func (c *Client) call(ctx context.Context, path string, body any, out any) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	method, rd := http.MethodGet, io.Reader(nil)
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("fencepost: encode %s body: %w", path, err)
		}
		method, rd = http.MethodPost, bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("fencepost: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return fmt.Errorf("fencepost: %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return problemError(resp.StatusCode, b)
	}
	if out != nil && len(bytes.TrimSpace(b)) > 0 {
		return json.Unmarshal(b, out)
	}
	return nil
}

func (c *Client) acquire(ctx context.Context, task string, create bool) (*grant, error) {
	var g grant
	err := c.call(ctx, "/v1/acquire", map[string]any{"taskId": task, "create": create}, &g)
	return &g, err
}

func (c *Client) claim(ctx context.Context) (*grant, error) {
	var g grant
	err := c.call(ctx, "/v1/claim", struct{}{}, &g)
	return &g, err
}

// Leases returns the sidecar's view of the leases it holds (all of them
// when task is empty).
func (c *Client) Leases(ctx context.Context, task string) ([]LeaseView, error) {
	var r struct {
		Leases []LeaseView `json:"leases"`
	}
	p := "/v1/lease"
	if task != "" {
		p += "?taskId=" + url.QueryEscape(task)
	}
	err := c.call(ctx, p, nil, &r)
	return r.Leases, err
}

// rawJSON encodes v for a checkpoint's data or a result: nil stays
// absent, json.RawMessage and []byte JSON pass unchanged.
func rawJSON(v any) (json.RawMessage, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return x, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("fencepost: encode JSON value: %w", err)
	}
	return b, nil
}
