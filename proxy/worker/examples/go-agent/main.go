// Command go-agent is an example worker written with the Go SDK: an
// agent-like loop that calls a tool per step, checkpoints after each, asks
// for approval half-way (wait + signal) and stops the moment its lease is
// lost. Under `fencepost run` it takes the sidecar's task (FENCEPOST_TASK);
// otherwise it acquires (creating) AGENT_TASK, default agent-demo.
//
//	go run ./proxy/worker/examples/go-agent
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/fencepost/fencepost/proxy/worker"
)

const steps = 6

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	c := worker.FromEnv()
	var err error
	if os.Getenv(worker.EnvTask) != "" {
		err = c.RunCurrent(ctx, agent)
	} else {
		task := os.Getenv("AGENT_TASK")
		if task == "" {
			task = "agent-demo"
		}
		err = c.Run(ctx, task, agent, worker.WithCreate())
	}
	switch {
	case errors.Is(err, worker.ErrLeaseLost):
		fmt.Println("stopped: the lease was lost:", err)
		os.Exit(3)
	case err != nil:
		fmt.Println("failed:", err)
		os.Exit(1)
	}
	fmt.Println("completed")
}

func agent(ctx context.Context, l *worker.Lease) error {
	var from struct{ Step int }
	_ = json.Unmarshal(l.ResumedFrom(), &from)
	fmt.Printf("task %s epoch %d, resuming at step %d\n", l.TaskID(), l.Epoch(), from.Step)
	for step := from.Step; step < steps; step++ {
		if err := tool(ctx, step); err != nil {
			return err // ctx cancelled on loss: Run reports the loss, never completes
		}
		if err := l.Checkpoint(ctx, fmt.Sprintf("step-%d", step), map[string]int{"step": step + 1}); err != nil {
			return err
		}
		if step == steps/2 && os.Getenv("AGENT_WAIT") != "" {
			fmt.Println("waiting for approval: fencepost ctl tasks signal", l.TaskID(), "--payload '\"ok\"'")
			sig, err := l.WaitExternal(ctx, 10*time.Minute)
			if err != nil {
				return err
			}
			fmt.Printf("resumed with %s under epoch %d\n", sig, l.Epoch())
		}
	}
	return nil
}

// tool is one tool call: a POST to AGENT_TOOL_URL (through the sidecar's
// proxy, which stamps the fencing token) or, without it, a second of work.
func tool(ctx context.Context, step int) error {
	u := os.Getenv("AGENT_TOOL_URL")
	if u == "" {
		select {
		case <-time.After(time.Second):
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(fmt.Sprintf("step %d", step)))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("tool call: %s", resp.Status)
	}
	return nil
}
