// Package conformance plays the worker SDKs' shared scenario
// (proxy/worker/testdata/conformance.json) with the Go SDK; the Python and
// TypeScript players read the same file and print the same transcript.
// The harness in proxy/worker (conformance_test.go) runs all three against
// the fake control API and against a real `fencepost dev`.
package conformance

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
	"reflect"
	"time"

	"github.com/fencepost/fencepost/proxy/worker"
)

// Scenario is the file's content.
type Scenario struct {
	Steps []Step `json:"steps"`
}

// Step is one worker or operator op.
type Step struct {
	Worker    string          `json:"worker,omitempty"`
	Operator  string          `json:"operator,omitempty"`
	Op        string          `json:"op,omitempty"`
	Create    bool            `json:"create,omitempty"`
	StepName  string          `json:"step,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	TimeoutMs int64           `json:"timeoutMs,omitempty"`
	Expect    map[string]any  `json:"expect,omitempty"`
}

// Line is one transcript line.
type Line struct {
	Step int            `json:"step"`
	Got  map[string]any `json:"got"`
}

// Load reads a scenario file.
func Load(path string) (*Scenario, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s Scenario
	return &s, json.Unmarshal(b, &s)
}

// cancelTimeout bounds the wait for a stop: a real sidecar learns of a
// revoke on its next heartbeat.
const cancelTimeout = 30 * time.Second

// Play runs the scenario for task through the control API at control,
// with operator ops POSTed to operator/<op>?task=T. It writes one JSON
// line per step to out and returns the first mismatch.
func Play(ctx context.Context, s *Scenario, control, operator, task string, out io.Writer) error {
	p := &player{c: worker.NewClient(control), operator: operator, task: task, actors: map[string]*actor{}}
	enc := json.NewEncoder(out)
	for i, st := range s.Steps {
		got, err := p.step(ctx, st)
		if err != nil {
			return fmt.Errorf("step %d (%s%s %s): %w", i, st.Worker, st.Operator, st.Op, err)
		}
		got = normalize(got)
		if err := enc.Encode(Line{Step: i, Got: got}); err != nil {
			return err
		}
		for k, want := range st.Expect {
			if !reflect.DeepEqual(normalize(map[string]any{k: want})[k], got[k]) {
				return fmt.Errorf("step %d (%s%s %s): %s = %v, want %v", i, st.Worker, st.Operator, st.Op, k, got[k], want)
			}
		}
	}
	return nil
}

// normalize round-trips through JSON so values compare as the file's.
func normalize(m map[string]any) map[string]any {
	b, _ := json.Marshal(m)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

type player struct {
	c        *worker.Client
	operator string
	task     string
	actors   map[string]*actor
	maxEpoch uint64
}

// epochIncreased records e and says whether it is above every earlier one.
func (p *player) epochIncreased(e uint64) bool {
	up := e > p.maxEpoch
	p.maxEpoch = max(p.maxEpoch, e)
	return up
}

func raw(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	var v any
	_ = json.Unmarshal(b, &v)
	return v
}

// code is an error as the transcript shows it.
func code(err error) any {
	if err == nil {
		return nil
	}
	var e *worker.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return err.Error()
}

func (p *player) step(ctx context.Context, st Step) (map[string]any, error) {
	if st.Operator != "" {
		return p.operate(ctx, st)
	}
	a := p.actors[st.Worker]
	switch st.Op {
	case "acquire", "claim":
		a = &actor{ops: make(chan func(), 1), done: make(chan error, 1), held: make(chan struct{})}
		p.actors[st.Worker] = a
		fn := func(ctx context.Context, l *worker.Lease) error {
			a.l, a.ctx = l, ctx
			close(a.held)
			for f := range a.ops {
				if f == nil {
					return nil
				}
				f()
			}
			return nil
		}
		go func() {
			if st.Op == "claim" {
				a.done <- p.c.RunNext(context.WithoutCancel(ctx), fn)
			} else {
				a.done <- p.c.Run(context.WithoutCancel(ctx), p.task, fn, worker.WithCreate())
			}
		}()
		select {
		case <-a.held:
		case err := <-a.done:
			return nil, fmt.Errorf("the block did not start: %w", err)
		}
		return map[string]any{"epochIncreased": p.epochIncreased(a.l.Epoch()), "resumedFrom": raw(a.l.ResumedFrom())}, nil
	case "leave":
		a.ops <- nil
		return map[string]any{"outcome": outcome(<-a.done)}, nil
	case "await_cancelled":
		select {
		case <-a.ctx.Done():
		case <-time.After(cancelTimeout):
			return map[string]any{"cancelled": false}, nil
		}
		var e *worker.Error
		kind := ""
		if errors.As(context.Cause(a.ctx), &e) {
			kind = e.Title
		}
		return map[string]any{"cancelled": true, "kind": kind}, nil
	}
	var got map[string]any
	a.do(func() {
		l := a.l
		switch st.Op {
		case "checkpoint":
			got = map[string]any{"error": code(l.Checkpoint(ctx, st.StepName, st.Data))}
		case "complete":
			got = map[string]any{"error": code(l.Complete(ctx, st.Result))}
		case "wait_external":
			sig, err := l.WaitExternal(ctx, time.Duration(st.TimeoutMs)*time.Millisecond)
			got = map[string]any{"error": code(err), "epochIncreased": p.epochIncreased(l.Epoch()), "signal": raw(sig)}
		default:
			got = map[string]any{"error": "unknown op " + st.Op}
		}
	})
	return got, nil
}

func outcome(err error) any {
	if err == nil {
		return "ok"
	}
	return code(err)
}

// actor runs one worker's block; ops run inside it, in order.
type actor struct {
	l    *worker.Lease
	ctx  context.Context
	ops  chan func()
	done chan error
	held chan struct{}
}

func (a *actor) do(f func()) {
	ran := make(chan struct{})
	a.ops <- func() { f(); close(ran) }
	<-ran
}

func (p *player) operate(ctx context.Context, st Step) (map[string]any, error) {
	u := p.operator + "/" + st.Operator + "?task=" + url.QueryEscape(p.task)
	method := http.MethodPost
	if st.Operator == "task" {
		method = http.MethodGet
	}
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(st.Data))
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("operator %s: %d %s", st.Operator, resp.StatusCode, b)
	}
	got := map[string]any{}
	if st.Operator == "task" {
		var t struct {
			State string `json:"state"`
		}
		if err := json.Unmarshal(b, &t); err != nil {
			return nil, err
		}
		got["state"] = t.State
	}
	return got, nil
}
