package worker

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"
)

// Lease is one held task inside Run. Its methods are the control calls
// for that task; after the lease is lost every one returns an error that
// matches ErrLeaseLost, without calling the sidecar.
type Lease struct {
	c      *Client
	taskID string
	cancel context.CancelCauseFunc
	onEv   func(Event)

	mu          sync.Mutex
	epoch       uint64
	resumedFrom json.RawMessage
	signal      json.RawMessage
	att         *attach
	ended       bool   // the worker completed, failed, gave back (or is waiting)
	pending     *Event // a stop seen while the worker's own end call was in flight
	lost        *Error // set once, by the first stop
	lostCh      chan struct{}
}

// TaskID is the task the lease is on.
func (l *Lease) TaskID() string { return l.taskID }

// Epoch is the lease's epoch (its fencing token); it grows when the block
// resumes after WaitExternal.
func (l *Lease) Epoch() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epoch
}

// ResumedFrom is the checkpoint data handed over with the lease (the
// JSON value an earlier owner checkpointed), nil on a fresh task.
func (l *Lease) ResumedFrom() json.RawMessage {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.resumedFrom
}

// Lost is closed the moment the sidecar says stop for this lease.
func (l *Lease) Lost() <-chan struct{} { return l.lostCh }

// Err is the loss (matching ErrLeaseLost) once Lost is closed, else nil.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost == nil {
		return nil
	}
	return l.lost
}

// stop records the first loss and cancels the work.
func (l *Lease) stop(ev Event) {
	l.mu.Lock()
	if l.lost != nil {
		l.mu.Unlock()
		return
	}
	if l.ended {
		// The worker is ending this epoch itself (complete, fail, give
		// back, wait): a stop now is the sidecar seeing that end (a state
		// showing it gone, or a heartbeat that saw the wait first). It
		// counts only if the worker's call fails.
		l.pending = &ev
		l.mu.Unlock()
		return
	}
	l.lost = lostError(ev)
	close(l.lostCh)
	l.mu.Unlock()
	l.cancel(l.lost)
	// The epoch is over: detach at once, so this stream cannot tie the
	// next owner's grant of the task (the sidecar ties what a stream told
	// its worker of, acquisitions included).
	go l.closeAttach()
}

// check returns the loss, if any, before a call.
func (l *Lease) check() error {
	if err := l.Err(); err != nil {
		return err
	}
	return nil
}

// after applies a call's error: a refusal meaning the lease is over
// stops the work as a stop event would.
func (l *Lease) after(err error) error {
	var e *Error
	if errors.As(err, &e) && e.Kind.LeaseLost {
		l.stop(Event{Kind: EventLost, TaskID: l.taskID, Epoch: l.Epoch(), Reason: e.Code, Stop: true})
	}
	return err
}

// Checkpoint records durable progress under the current epoch: step names
// it, data (any JSON-encodable value, nil for none) is what the next owner
// gets as ResumedFrom.
func (l *Lease) Checkpoint(ctx context.Context, step string, data any) error {
	if err := l.check(); err != nil {
		return err
	}
	raw, err := rawJSON(data)
	if err != nil {
		return err
	}
	body := map[string]any{"taskId": l.taskID, "step": step}
	if raw != nil {
		body["data"] = raw
	}
	return l.after(l.c.call(ctx, "/v1/checkpoint", body, nil))
}

// Progress marks progress without a checkpoint (carried to the cluster by
// the next heartbeat), so a profile's progress deadline does not end a
// long step.
func (l *Lease) Progress(ctx context.Context) error {
	if err := l.check(); err != nil {
		return err
	}
	return l.after(l.c.call(ctx, "/v1/progress", map[string]any{"taskId": l.taskID}, nil))
}

// Complete ends the lease with the task completed; result is any
// JSON-encodable value (nil for none).
func (l *Lease) Complete(ctx context.Context, result any) error {
	raw, err := rawJSON(result)
	if err != nil {
		return err
	}
	body := map[string]any{"taskId": l.taskID}
	if raw != nil {
		body["result"] = raw // absent, not null, when there is none (as the other SDKs send it)
	}
	return l.end(ctx, "/v1/complete", body)
}

// Fail ends the lease with the task failed for reason.
func (l *Lease) Fail(ctx context.Context, reason string) error {
	return l.end(ctx, "/v1/fail", map[string]any{"taskId": l.taskID, "reason": reason})
}

// GiveBack ends the lease and makes the task claimable again at once.
func (l *Lease) GiveBack(ctx context.Context) error {
	return l.end(ctx, "/v1/giveback", map[string]any{"taskId": l.taskID})
}

// end makes the call that ends the epoch; the attach stream closes
// cleanly after it succeeds.
func (l *Lease) end(ctx context.Context, path string, body any) error {
	if err := l.check(); err != nil {
		return err
	}
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		return ErrEnded
	}
	l.ended = true
	l.mu.Unlock()
	if err := l.c.call(ctx, path, body, nil); err != nil {
		l.unend()
		return l.after(err)
	}
	l.closeAttach()
	return nil
}

// unend undoes ended after the worker's end call failed, applying a stop
// that came meanwhile.
func (l *Lease) unend() {
	l.mu.Lock()
	l.ended = false
	ev := l.pending
	l.pending = nil
	l.mu.Unlock()
	if ev != nil {
		l.stop(*ev)
	}
}

// ErrEnded is returned by a call that ends a lease the worker already
// ended.
var ErrEnded = errors.New("fencepost: the lease was already completed, failed or given back")

func (l *Lease) closeAttach() {
	l.mu.Lock()
	a := l.att
	l.att = nil
	l.mu.Unlock()
	if a != nil {
		a.close()
	}
}

// Signal is the signal data the task was resumed with by the last
// WaitExternal, nil when none.
func (l *Lease) Signal() json.RawMessage {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.signal
}

// Polling of a waiting task: the cluster tells no sidecar when a signal
// comes, so WaitExternal asks again, backing off to waitPollMax.
const (
	waitPollMin = 100 * time.Millisecond
	waitPollMax = time.Second
)

// WaitExternal parks the task until a signal (fencepost ctl tasks signal)
// or timeout (0: no timeout), then takes it again under a new epoch and
// returns the signal's data (nil after a timeout). The epoch between is
// nobody's: the lease is given up while waiting.
func (l *Lease) WaitExternal(ctx context.Context, timeout time.Duration) (json.RawMessage, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.ended = true
	l.mu.Unlock()
	if err := l.c.call(ctx, "/v1/wait", map[string]any{"taskId": l.taskID, "timeoutMs": timeout.Milliseconds()}, nil); err != nil {
		l.unend()
		return nil, l.after(err)
	}
	// The attach stream stays open: nothing is held while waiting, and the
	// same stream ties the next grant.
	poll := waitPollMin
	for {
		g, err := l.c.acquire(ctx, l.taskID, false)
		if err == nil {
			if err := l.take(ctx, g); err != nil {
				return nil, err
			}
			l.mu.Lock()
			l.ended, l.pending = false, nil
			l.mu.Unlock()
			l.mu.Lock()
			a := l.att
			l.mu.Unlock()
			a.setEpoch(g.Lease.Epoch) // fires a stop for the new epoch seen meanwhile
			return l.Signal(), nil
		}
		var e *Error
		if !errors.As(err, &e) || (e.Kind != ErrTaskWaiting && !e.Retryable) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(poll):
		}
		poll = min(poll*2, waitPollMax)
	}
}

// take makes a grant this lease's current epoch and attaches to it.
func (l *Lease) take(ctx context.Context, g *grant) error {
	l.mu.Lock()
	l.epoch = g.Lease.Epoch
	if len(g.CheckpointData) > 0 && string(g.CheckpointData) != "null" {
		l.resumedFrom = g.CheckpointData
	}
	l.signal = nil
	if len(g.Task.Signal) > 0 {
		l.signal = asJSON(g.Task.Signal)
	}
	epoch, open := l.epoch, l.att
	l.mu.Unlock()
	if open != nil {
		return nil // the block's stream; WaitExternal moves it to the new epoch
	}
	a, err := l.c.openAttach(ctx, l.taskID, epoch, l.onEv, l.stop)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.att = a
	l.mu.Unlock()
	return nil
}

// asJSON returns b when it is JSON text, else b as a JSON string (a
// signal sent as plain text).
func asJSON(b []byte) json.RawMessage {
	if json.Valid(b) {
		return json.RawMessage(b)
	}
	s, _ := json.Marshal(string(b))
	return s
}
