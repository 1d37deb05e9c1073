package proxy

import (
	"context"
	"net"
	"time"

	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/leases"
	"github.com/fencepost/fencepost/proxy/workertie"
)

// The worker's tie to its leases (DESIGN.md 17): the sidecar gives its
// parts what package workertie needs of the keeper, runs the health probe
// when Config.Worker.Health names one, and hands `fencepost run` the
// supervisor's keeper and the worker's environment.

// tieKeeper is the lease keeper as package workertie consumes it.
type tieKeeper struct {
	k    *leases.Router
	task string // one-task mode's task; "" otherwise
	lost chan workertie.Event
}

func newTieKeeper(k *leases.Router, task string) *tieKeeper {
	return &tieKeeper{k: k, task: task, lost: make(chan workertie.Event, 16)}
}

// run forwards the keeper's stop events to lost until ctx ends.
func (t *tieKeeper) run(ctx context.Context) {
	for ctx.Err() == nil {
		ch, cancel := t.k.Subscribe()
		t.forward(ctx, ch)
		cancel()
		// Dropped as too slow, or the keeper closed: subscribe again,
		// without spinning on a closed broker.
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (t *tieKeeper) forward(ctx context.Context, ch <-chan leases.Event) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-ch:
			if !ok {
				return
			}
			se := leases.StreamEvent(ev)
			if !se.Stop {
				continue
			}
			select {
			case t.lost <- workertie.Event{Lease: workertie.Lease{Task: ev.TaskID, Epoch: ev.Epoch}, Kind: string(ev.Kind), Reason: ev.Reason, Stop: true}:
			default: // nobody supervises a child: drop
			}
		}
	}
}

func (t *tieKeeper) Held() []workertie.Lease {
	var out []workertie.Lease
	for _, r := range t.k.Held() {
		out = append(out, workertie.Lease{Task: r.TaskID, Epoch: r.Epoch})
	}
	return out
}

func (t *tieKeeper) GiveBack(ctx context.Context, l workertie.Lease, reason string) error {
	return t.k.End(ctx, l.Task, l.Epoch, lease.OutcomeGivenBack, reason)
}

func (t *tieKeeper) Complete(ctx context.Context, l workertie.Lease) error {
	return t.k.End(ctx, l.Task, l.Epoch, lease.OutcomeCompleted, "")
}

func (t *tieKeeper) Lost() <-chan workertie.Event { return t.lost }

func (t *tieKeeper) Acquire(ctx context.Context) (workertie.Grant, error) {
	if t.task == "" {
		return workertie.Grant{}, nil
	}
	g, err := t.k.HoldOneTask(ctx)
	if err != nil {
		return workertie.Grant{}, err
	}
	return workertie.Grant{Lease: workertie.Lease{Task: g.TaskID, Epoch: g.Epoch}, Checkpoint: g.Checkpoint}, nil
}

// WorkerKeeper is the sidecar's keeper as `fencepost run`'s supervisor
// needs it (package workertie).
func (s *Sidecar) WorkerKeeper() workertie.Keeper { return s.tie }

// WorkerEnv is the environment of a worker the sidecar starts under g:
// the control API, the proxy (both cases), NO_PROXY naming the control
// API's host, the interception CA bundle, and the lease.
func (s *Sidecar) WorkerEnv(g workertie.Grant) workertie.Env {
	host, _, _ := net.SplitHostPort(s.ControlAddr())
	e := workertie.Env{ControlURL: "http://" + s.ControlAddr(), ProxyURL: "http://" + s.ProxyAddr(), NoProxy: host, Grant: g}
	if s.ca != nil {
		e.CABundle = s.cfg.Intercept.BundleFile
	}
	return e
}

// runProbe probes the worker (Config.Worker.Health) until ctx ends: an
// unhealthy worker's leases are given back (reason worker_unhealthy); a
// worker healthy again is, in one-task mode, given the task again.
func (s *Sidecar) runProbe(ctx context.Context) {
	p := &workertie.Probe{Health: s.cfg.Worker.Health, Log: s.log.Named("probe"),
		Unhealthy: func(cause error) {
			gctx, cancel := context.WithTimeout(ctx, s.cfg.ClusterTimeout)
			defer cancel()
			done, err := workertie.GiveBackAll(gctx, s.tie, lease.ReasonWorkerUnhealthy)
			s.log.Warn("worker unhealthy: its leases given back", zap.Int("leases", len(done)), zap.NamedError("cause", cause), zap.Error(err))
		},
		Healthy: func() { s.keeper.WorkerAttached() },
	}
	p.Run(ctx)
}
