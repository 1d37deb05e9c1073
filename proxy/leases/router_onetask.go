package leases

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

// One-task mode (Settings.Task): the router acquires the task at start,
// in whichever cluster it lives (Acquire's route), and again for a new
// worker after its predecessor's lease was given back.

// acquireOne acquires the one task, creating it when missing.
func (r *Router) acquireOne(ctx context.Context) (api.Grant, error) {
	return r.Acquire(ctx, r.task, false, api.AcquireRequest{Create: true, Profile: r.profile})
}

// retryWait sleeps after the fails-th failed acquire of the one task,
// or until ctx ends.
func (r *Router) retryWait(ctx context.Context, fails int) {
	k := r.keeperOf(r.task)
	k.sleep(ctx, retryDelay(fails, 4*k.cfg.SessionHeartbeat), nil)
}

// runOneTask acquires the configured task (creating it when missing) and
// retries with jitter until it holds it or the sidecar stops. A lease
// lost later is not re-acquired: a revoke must stick, and a worker whose
// lease expired should restart from the checkpoint with a fresh sidecar.
func (r *Router) runOneTask(ctx context.Context) {
	fails := 0
	for ctx.Err() == nil {
		_, err := r.acquireOne(ctx)
		if err == nil {
			return
		}
		if errors.Is(err, lease.ErrTaskFinal) {
			r.log.Error("one-task mode: task is final; not acquiring", zap.String("task", r.task), zap.Error(err))
			return
		}
		fails++
		if !errors.Is(err, ErrNoSession) {
			if ce := r.log.Check(zap.InfoLevel, "one-task mode: acquire failed, retrying"); ce != nil {
				ce.Write(zap.String("task", r.task), zap.Int("attempt", fails), zap.Error(err))
			}
		}
		r.retryWait(ctx, fails)
	}
}

// HoldOneTask returns the one-task mode lease a new worker runs under: the
// one held now, else the task acquired again (a new, higher epoch),
// retrying until it is granted or ctx ends.
func (r *Router) HoldOneTask(ctx context.Context) (Handover, error) {
	fails := 0
	for {
		if ref, why := r.Check(r.task); why == "" {
			return Handover{Ref: ref, Checkpoint: r.keeperOf(r.task).handover.get(ref)}, nil
		}
		g, err := r.acquireOne(ctx)
		if err == nil {
			ref := Ref{TaskID: g.Task.ID, Epoch: g.Lease.Epoch}
			return Handover{Ref: ref, Checkpoint: r.keeperOf(r.task).handover.get(ref)}, nil
		}
		if ctx.Err() != nil {
			return Handover{}, ctx.Err()
		}
		if errors.Is(err, lease.ErrTaskFinal) {
			return Handover{}, err
		}
		fails++
		r.retryWait(ctx, fails)
	}
}

// WorkerAttached tells the router a (new) worker tied itself to the
// sidecar: in one-task mode, a task given back for its predecessor's
// death is acquired again, in the background.
func (r *Router) WorkerAttached() {
	ctx, _ := r.runCtx.Load().(context.Context)
	if r.task == "" || ctx == nil || ctx.Err() != nil {
		return
	}
	if _, why := r.Check(r.task); why == "" {
		return
	}
	if !r.reacquiring.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer r.reacquiring.Store(false)
		if _, err := r.HoldOneTask(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("one-task mode: acquiring the task for the new worker", zap.String("task", r.task), zap.Error(err))
		}
	}()
}
