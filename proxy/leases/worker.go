package leases

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/eventstream"
)

// What the worker tie (proxy/workertie, DESIGN.md 17) and the control
// API's attach and progress routes need of the keeper: the held leases,
// giving one back with the worker's reason, progress marks carried by the
// next heartbeat, and the contract's event stream.

// leaseKey names one lease: a task and an epoch.
type leaseKey struct {
	task  string
	epoch uint64
}

func keyOf(r Ref) leaseKey { return leaseKey{r.TaskID, r.Epoch} }

// progressMarks is the latest progress mark of each held lease, on the
// keeper's clock; the heartbeat reports how long ago it was.
type progressMarks struct {
	mu sync.Mutex
	at map[leaseKey]time.Time
}

func (p *progressMarks) mark(r Ref, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.at == nil {
		p.at = map[leaseKey]time.Time{}
	}
	p.at[keyOf(r)] = now
}

// stamp sets SinceProgressMs on each held lease that has a mark (at least
// 1 ms), as of sent, and forgets marks of leases no longer held.
func (p *progressMarks) stamp(held []api.HeldLease, sent time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.at) == 0 {
		return
	}
	keep := make(map[leaseKey]time.Time, len(p.at))
	for i := range held {
		r := leaseKey{held[i].TaskID, held[i].Epoch}
		at, ok := p.at[r]
		if !ok {
			continue
		}
		keep[r] = at
		ms := sent.Sub(at).Milliseconds()
		held[i].SinceProgressMs = uint64(min(max(ms, 1), int64(api.MaxSinceProgressMs)))
	}
	p.at = keep
}

// MarkProgress records a progress mark for taskID ("" = the only lease
// held) under its current epoch: the next heartbeat carries it to the
// cluster, which resets the profile's progress deadline. It returns the
// reason the lease is not current, if it is not.
func (k *Keeper) MarkProgress(taskID string) (Ref, Reason) {
	ref, why := k.Check(taskID)
	if why != "" {
		return ref, why
	}
	k.progress.mark(ref, k.clock.Now())
	return ref, ""
}

// Held lists the leases held now.
func (k *Keeper) Held() []Ref {
	var out []Ref
	for _, v := range k.Views() {
		out = append(out, Ref{TaskID: v.TaskID, Epoch: v.Epoch})
	}
	return out
}

// End ends lease (taskID, epoch) for the worker: completed, or given back
// with reason (worker_exited, worker_unhealthy). A lease the sidecar no
// longer holds under that epoch is left alone. The lease is dropped
// locally even when the cluster cannot be reached (it then expires).
func (k *Keeper) End(ctx context.Context, taskID string, epoch uint64, outcome lease.Outcome, reason string) error {
	held := false
	for _, v := range k.Views() {
		held = held || (v.TaskID == taskID && v.Epoch == epoch)
	}
	if !held {
		return nil
	}
	r := ReasonReleased
	k.Hold(taskID, epoch, r)
	var err error
	if sid := k.SessionID(); sid != "" {
		cctx, cancel := context.WithTimeout(ctx, k.cfg.ClusterTimeout)
		_, err = k.cluster.Release(cctx, taskID, api.ReleaseRequest{SessionID: sid, Epoch: epoch, Outcome: outcome, Reason: reason})
		cancel()
		if err != nil {
			k.log.Warn("ending the worker's lease", zap.String("task", taskID), zap.String("reason", reason), zap.Error(err))
			err = fmt.Errorf("leases: end %s: %w", taskID, err)
		}
	}
	why := reason
	if why == "" {
		why = string(outcome)
	}
	k.Drop(taskID, epoch, r, EventReleased, why)
	return err
}

// workerAsked are the release reasons of the worker's own control calls
// (complete, fail, give back, wait): the only releases that do not tell
// the worker to stop.
var workerAsked = map[string]bool{
	string(lease.OutcomeCompleted): true, string(lease.OutcomeFailed): true,
	string(lease.OutcomeGivenBack): true, "waiting": true,
}

// StreamEvent is the contract's form of a keeper event (the stop rule:
// lost and revoked always stop; a release stops unless the worker asked).
func StreamEvent(ev Event) eventstream.Event {
	return eventstream.Event{Kind: eventstream.Kind(ev.Kind), TaskID: ev.TaskID, Epoch: ev.Epoch, Reason: ev.Reason, At: ev.At,
		Stop: ev.Kind == EventReleased && !workerAsked[ev.Reason]}
}

// Stream subscribes to the contract's event stream (GET /v1/events,
// /v1/attach) scoped to taskID ("" for every lease), resuming after
// lastID when it can; the first events are otherwise the state of every
// lease held in scope.
func (k *Keeper) Stream(lastID, taskID string) *eventstream.Subscription {
	return k.stream.Subscribe(lastID, taskID, func() []eventstream.Event {
		var out []eventstream.Event
		now := k.clock.Now()
		for _, v := range k.Views() {
			why := ""
			if !v.Current {
				why = v.Status
			}
			out = append(out, eventstream.Event{TaskID: v.TaskID, Epoch: v.Epoch, Reason: why, At: now})
		}
		return out
	})
}

// Handover is the lease a one-task worker runs under, with the
// checkpoint handed over at its grant (JSON text, "" when none).
type Handover struct {
	Ref
	Checkpoint string
}

// handovers remembers the checkpoint each grant handed over.
type handovers struct {
	mu sync.Mutex
	by map[leaseKey]string
}

func (h *handovers) put(ref Ref, g api.Grant) {
	r := keyOf(ref)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.by == nil {
		h.by = map[leaseKey]string{}
	}
	data := ""
	if g.Task.Checkpoint != nil {
		data = string(g.Task.Checkpoint.Data)
	}
	h.by[r] = data
	if len(h.by) > 64 {
		for k := range h.by {
			if k != r {
				delete(h.by, k)
				break
			}
		}
	}
}

func (h *handovers) get(r Ref) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.by[keyOf(r)]
}
