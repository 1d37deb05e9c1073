package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy"
	"github.com/fencepost/fencepost/test/scenario"
)

// Worker is one agent behind its sidecar: it claims tasks, makes its tool
// calls through the sidecar (to the raw recorder first, then to fenced),
// checkpoints every few steps and completes the task.
type Worker struct {
	Name string
	sc   *Sidecar
	w    *scenario.Worker
	sys  *System
	h    *History
	rng  *rand.Rand
	tie  *tie // the worker's attach stream and health URL (liveness.go)

	mu     sync.Mutex
	paused chan struct{} // non-nil while paused; closed on resume
	task   string        // the task held now ("" between tasks)
	epoch  uint64
}

func newWorker(sys *System, sc *Sidecar, h *History, seed uint64) *Worker {
	t, err := newTie(sc.Control, sc.Health)
	if err != nil {
		sys.tb.Fatalf("worker %s: health URL: %v", sc.Name, err)
	}
	return &Worker{Name: sc.Name, sc: sc, w: scenario.NewWorker(sc.Name, sc.Proxy, sc.Control), sys: sys, h: h,
		rng: rand.New(rand.NewPCG(seed, uint64(len(sc.Name)))), tie: t}
}

// Pause stops the worker before its next operation (what SIGSTOP does to a
// worker process: an operation already sent stays in flight).
func (w *Worker) Pause() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.paused == nil {
		w.paused = make(chan struct{})
	}
}

// Resume lets a paused worker go on.
func (w *Worker) Resume() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.paused != nil {
		close(w.paused)
		w.paused = nil
	}
}

// Holding returns the task and epoch the worker holds now.
func (w *Worker) Holding() (string, uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.task, w.epoch
}

func (w *Worker) gate(ctx context.Context) {
	w.mu.Lock()
	ch := w.paused
	w.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
		}
	}
}

func (w *Worker) setHolding(task string, epoch uint64) {
	w.mu.Lock()
	w.task, w.epoch = task, epoch
	w.mu.Unlock()
}

// Run works until ctx ends.
func (w *Worker) Run(ctx context.Context) {
	defer w.w.Close()
	go w.tie.run(ctx)
	for ctx.Err() == nil {
		w.gate(ctx)
		g, err := w.w.Claim(ctx)
		w.h.op()
		if err != nil {
			pause(ctx, 20*time.Millisecond+time.Duration(w.rng.IntN(30))*time.Millisecond)
			continue
		}
		task, epoch := g.Task.ID, g.Lease.Epoch
		w.setHolding(task, epoch)
		w.h.grant(Grant{At: time.Now(), Worker: w.Name, Task: task, Epoch: epoch})
		seq := uint64(0)
		if g.Task.Checkpoint != nil {
			seq = g.Task.Checkpoint.Seq
		}
		if w.work(ctx, task, epoch, seq) {
			w.gate(ctx)
			err := w.w.Complete(ctx, task)
			w.h.op()
			if err != nil {
				w.lostOrFailed(task, epoch, "complete", err)
			}
		} else if ctx.Err() == nil {
			// The worker stops on this task; were the lease still live in
			// the cluster (revived by a late heartbeat, or given a new TTL
			// by a new leader), giving it back lets another worker take
			// it now rather than after the sidecar stops heartbeating.
			err := w.w.GiveBack(ctx, task, "the worker stopped on a lost lease")
			w.h.op()
			if err == nil {
				w.h.Logf(w.Name, "gave back %s epoch=%d", task, epoch)
			}
		}
		w.setHolding("", 0)
	}
}

// work runs a task's steps; false when the lease was lost or the sidecar
// failed on the way.
func (w *Worker) work(ctx context.Context, task string, epoch, seq uint64) bool {
	steps := 8 + w.rng.IntN(16)
	body := []byte(fmt.Sprintf(`{"worker":%q}`, w.Name))
	for i := range steps {
		w.gate(ctx)
		if ctx.Err() != nil {
			return false
		}
		key := fmt.Sprintf("%s/%d/%d", w.Name, epoch, i)
		for _, target := range []string{w.sys.Recorder.URL(task), w.sys.FencedURL(task)} {
			r := w.w.WriteKey(ctx, target, task, key, body)
			w.h.op()
			switch r.Outcome {
			case scenario.Accepted:
			case scenario.BlockedBySidecar, scenario.CutInFlight, scenario.RejectedStale:
				w.h.loss(Loss{At: r.Done, Worker: w.Name, Task: task, Epoch: epoch, Why: fmt.Sprintf("write %s (%s)", r.Outcome, r.Code)})
				return false
			default:
				if ctx.Err() == nil {
					w.h.Logf(w.Name, "write on %s epoch=%d failed: %v", task, epoch, r.Err)
				}
				return false
			}
		}
		if i%4 == 3 {
			seq++
			at := time.Now()
			t, err := w.w.CheckpointSeq(ctx, task, seq, fmt.Sprintf("%s-%d", w.Name, i), nil)
			w.h.op()
			if err != nil {
				w.h.cpFailed(at)
				if w.lostOrFailed(task, epoch, "checkpoint", err) {
					return false
				}
				seq-- // not taken; the next one reuses the number
				continue
			}
			if t.Checkpoint != nil && t.Checkpoint.Seq == seq {
				w.h.ack(Ack{At: time.Now(), Worker: w.Name, Task: task, Epoch: epoch, Seq: seq}, at)
			}
		}
	}
	return true
}

// lostOrFailed records a failed control call; it reports whether the
// lease is gone (a refusal for the lease's state).
func (w *Worker) lostOrFailed(task string, epoch uint64, what string, err error) bool {
	var pe *scenario.ProblemError
	if errors.As(err, &pe) && lostCodes[pe.Problem.Code] {
		w.h.loss(Loss{At: time.Now(), Worker: w.Name, Task: task, Epoch: epoch, Why: fmt.Sprintf("%s: %v", what, err)})
		return true
	}
	w.h.Logf(w.Name, "%s on %s epoch=%d failed: %v", what, task, epoch, err)
	return !errors.As(err, &pe) // the sidecar itself did not answer
}

// lostCodes are the control API's problem codes that mean the lease is
// gone.
var lostCodes = map[string]bool{
	lease.ErrorCode(lease.ErrStaleEpoch): true, lease.ErrorCode(lease.ErrNotHolder): true,
	lease.ErrorCode(lease.ErrLeaseNotActive): true, proxy.CodeNoLease: true,
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
