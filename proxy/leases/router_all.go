package leases

import (
	"context"
	"sort"
	"strings"

	"github.com/fencepost/fencepost/proxy/eventstream"
)

// What the Router answers across every cluster: the lease views, the
// loops, readiness, shutdown and the shared event streams.

// Run starts every keeper's loops (and one-task mode's) under ctx.
func (r *Router) Run(ctx context.Context, goLoop func(func())) {
	r.runCtx.Store(ctx)
	for _, k := range r.order {
		k.Run(ctx, goLoop)
	}
	if r.task != "" {
		goLoop(func() { r.runOneTask(ctx) })
	}
}

// Views is the local view of every held lease in every cluster, by task id.
func (r *Router) Views() []View {
	if len(r.order) == 1 {
		return r.order[0].Views()
	}
	var out []View
	for _, k := range r.order {
		out = append(out, k.Views()...)
	}
	sortViews(out)
	return out
}

// Held lists the leases held now, in every cluster.
func (r *Router) Held() []Ref {
	var out []Ref
	for _, v := range r.Views() {
		out = append(out, Ref{TaskID: v.TaskID, Epoch: v.Epoch})
	}
	return out
}

// TaskIDs returns the ids of the held leases, sorted, in every cluster.
func (r *Router) TaskIDs() []string {
	var out []string
	for _, k := range r.order {
		out = append(out, k.TaskIDs()...)
	}
	sort.Strings(out)
	return out
}

// Subscribe returns a channel of every cluster's lease events and a
// cancel function.
func (r *Router) Subscribe() (<-chan Event, func()) { return r.events.subscribe() }

// Stream subscribes to the contract's event stream scoped to taskID (""
// for every lease), resuming after lastID when it can; the first events
// are otherwise the state of every lease held in scope. One hub serves
// every cluster, so event ids are one sequence.
func (r *Router) Stream(lastID, taskID string) *eventstream.Subscription {
	return r.stream.Subscribe(lastID, taskID, func() []eventstream.Event {
		var out []eventstream.Event
		now := r.clock.Now()
		for _, v := range r.Views() {
			why := ""
			if !v.Current {
				why = v.Status
			}
			out = append(out, eventstream.Event{TaskID: v.TaskID, Epoch: v.Epoch, Reason: why, At: now})
		}
		return out
	})
}

// HeartbeatOnce sends one heartbeat on every open session now.
func (r *Router) HeartbeatOnce(ctx context.Context) {
	for _, k := range r.order {
		k.HeartbeatOnce(ctx)
	}
}

// ClusterState is one cluster's part of the sidecar's state: whether its
// session is open, whether it answers (open, and the last heartbeat did
// not fail), and how many leases it holds.
type ClusterState struct {
	Name    string `json:"name"`
	Session bool   `json:"session"`
	Up      bool   `json:"up"`
	Leases  int    `json:"leases"`
}

// Clusters is every cluster's state, in the order given.
func (r *Router) Clusters() []ClusterState {
	out := make([]ClusterState, 0, len(r.order))
	for i, k := range r.order {
		open := k.SessionID() != ""
		out = append(out, ClusterState{Name: r.names[i], Session: open, Up: open && !k.failing.Load(), Leases: k.table.count()})
	}
	return out
}

// Ready reports the leases' part of readiness. One-task mode waits for a
// current lease on its task; otherwise one open session is enough: a
// cluster that is down fails only its own tasks' calls, so it must not
// take the sidecar out of service for the others. The reason names the
// clusters that are not up (ClusterState.Up).
func (r *Router) Ready() (bool, string) {
	var down []string
	open := 0
	for _, c := range r.Clusters() {
		if c.Session {
			open++
		}
		if !c.Up {
			down = append(down, c.Name)
		}
	}
	if r.task != "" {
		if ok, why := r.keeperOf(r.task).Ready(); !ok {
			return false, why
		}
		if _, why := r.Check(r.task); why != "" {
			return false, "no current lease on " + r.task + ": " + string(why)
		}
		return true, "ok"
	}
	switch {
	case open == 0:
		return false, "no cluster session"
	case len(down) > 0 && len(r.order) > 1:
		return true, "ok; cluster " + strings.Join(down, ", ") + " not answering: its tasks are blocked"
	}
	return true, "ok"
}

// GiveBackAll gives every held lease back in every cluster
// (Keeper.GiveBackAll).
func (r *Router) GiveBackAll(ctx context.Context) {
	for _, k := range r.order {
		k.GiveBackAll(ctx)
	}
}

// CloseSession closes every cluster's session, then ends every
// subscription.
func (r *Router) CloseSession(ctx context.Context) {
	for _, k := range r.order {
		k.CloseSession(ctx)
	}
	r.events.close()
	r.stream.Close()
}
