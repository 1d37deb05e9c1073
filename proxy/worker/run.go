package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// OnError says how Run ends a lease whose work returned an error or
// panicked. Run never completes a task whose work failed.
type OnError int

const (
	// FailTask fails the task with the error as the reason (the default).
	FailTask OnError = iota
	// GiveBackTask gives the task back, claimable again at once.
	GiveBackTask
)

// Option configures Run, RunNext and RunCurrent.
type Option func(*runConfig)

type runConfig struct {
	create  bool
	onError OnError
	onEvent func(Event)
}

// WithCreate makes Run create the task when the cluster does not know it.
func WithCreate() Option { return func(c *runConfig) { c.create = true } }

// WithOnError sets what happens to the lease when the work fails.
func WithOnError(o OnError) Option { return func(c *runConfig) { c.onError = o } }

// WithEvents calls fn with every event of the task's attach stream, in
// order (from the stream's goroutine: fn must not block).
func WithEvents(fn func(Event)) Option { return func(c *runConfig) { c.onEvent = fn } }

// endTimeout bounds the call that ends a lease after the work returned,
// whose own context may be cancelled by then.
const endTimeout = 30 * time.Second

// Run acquires taskID through the sidecar at FENCEPOST_CONTROL_URL and
// runs fn under the lease; see Client.Run.
func Run(ctx context.Context, taskID string, fn func(context.Context, *Lease) error, opts ...Option) error {
	return FromEnv().Run(ctx, taskID, fn, opts...)
}

// Run acquires taskID and runs fn under the lease. fn's context is
// cancelled, with a cause matching ErrLeaseLost, the moment the sidecar
// says stop. When fn returns nil the task is completed (unless fn already
// ended the lease); when it returns an error or panics, the lease is
// failed or given back (WithOnError; given back when ctx itself was
// cancelled, as on shutdown) and the error returned. A lost lease
// is never ended by Run: it is over already, and Run returns the loss.
func (c *Client) Run(ctx context.Context, taskID string, fn func(context.Context, *Lease) error, opts ...Option) error {
	cfg := config(opts)
	return c.hold(ctx, cfg, fn, func(ctx context.Context) (*grant, error) { return c.acquire(ctx, taskID, cfg.create) })
}

// RunNext claims the next claimable task and runs fn under its lease, as
// Run. It returns an error matching ErrNoTask when nothing is claimable.
func (c *Client) RunNext(ctx context.Context, fn func(context.Context, *Lease) error, opts ...Option) error {
	return c.hold(ctx, config(opts), fn, c.claim)
}

// RunCurrent runs fn under the lease the sidecar already holds (one-task
// mode, `fencepost run`): the task named by FENCEPOST_TASK, else the only
// lease GET /v1/lease shows. ResumedFrom is FENCEPOST_CHECKPOINT.
func (c *Client) RunCurrent(ctx context.Context, fn func(context.Context, *Lease) error, opts ...Option) error {
	return c.hold(ctx, config(opts), fn, func(ctx context.Context) (*grant, error) {
		task := os.Getenv(EnvTask)
		views, err := c.Leases(ctx, task)
		if err != nil {
			return nil, err
		}
		if len(views) != 1 {
			return nil, fmt.Errorf("%w (task %q, %d leases held)", ErrNoTaskInEnv, task, len(views))
		}
		g := &grant{Lease: views[0]}
		g.Task.ID = views[0].TaskID
		if cp := os.Getenv(EnvCheckpoint); cp != "" && (task == "" || task == views[0].TaskID) {
			g.CheckpointData = asJSON([]byte(cp))
		}
		if e, err := strconv.ParseUint(os.Getenv(EnvEpoch), 10, 64); err == nil && task != "" && e != views[0].Epoch {
			return nil, &Error{Kind: ErrStaleEpoch, Code: ErrStaleEpoch.Code, Detail: fmt.Sprintf("FENCEPOST_EPOCH is %d, the sidecar holds epoch %d", e, views[0].Epoch), Epoch: views[0].Epoch}
		}
		return g, nil
	})
}

func config(opts []Option) *runConfig {
	cfg := &runConfig{}
	for _, o := range opts {
		o(cfg)
	}
	return cfg
}

// hold takes a lease with get, attaches, runs fn and ends the lease.
func (c *Client) hold(ctx context.Context, cfg *runConfig, fn func(context.Context, *Lease) error, get func(context.Context) (*grant, error)) (err error) {
	g, err := get(ctx)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	l := &Lease{c: c, taskID: g.Lease.TaskID, cancel: cancel, onEv: cfg.onEvent, lostCh: make(chan struct{})}
	if l.taskID == "" {
		l.taskID = g.Task.ID
	}
	if err := l.take(ctx, g); err != nil {
		// Without the stream the work could not be stopped: do not start it.
		ectx, ecancel := context.WithTimeout(context.WithoutCancel(ctx), endTimeout)
		defer ecancel()
		_ = c.call(ectx, "/v1/giveback", map[string]any{"taskId": l.taskID}, nil)
		return fmt.Errorf("fencepost: attach to %s: %w", l.taskID, err)
	}
	defer l.closeAttach()
	defer func() {
		if p := recover(); p != nil {
			l.finish(ctx, cfg, fmt.Errorf("panic: %v", p))
			panic(p)
		}
	}()
	return l.finish(ctx, cfg, fn(wctx, l))
}

// finish ends the lease after the work returned workErr.
func (l *Lease) finish(ctx context.Context, cfg *runConfig, workErr error) error {
	if lost := l.Err(); lost != nil {
		if workErr == nil || errors.Is(workErr, context.Canceled) || errors.Is(workErr, ErrLeaseLost) {
			return lost
		}
		return errors.Join(lost, workErr)
	}
	l.mu.Lock()
	ended := l.ended
	l.mu.Unlock()
	if ended {
		return workErr
	}
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endTimeout)
	defer cancel()
	if workErr == nil {
		return l.Complete(ectx, nil)
	}
	var endErr error
	if cfg.onError == GiveBackTask || ctx.Err() != nil {
		// The caller cancelled the work (a shutdown, say): nothing failed, so
		// the task goes back to be claimed at once.
		endErr = l.GiveBack(ectx)
	} else {
		endErr = l.Fail(ectx, workErr.Error())
	}
	if endErr != nil {
		return errors.Join(workErr, endErr)
	}
	return workErr
}
