package leases

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/clock"
	"github.com/fencepost/fencepost/proxy/eventstream"
)

// Router is the sidecar's leases over one or several independent
// clusters (README "More than one cluster"): one Keeper per cluster, each
// with its own session, heartbeat loop, watch and watchdog, and a route
// from task id to keeper. A task's lease lives in one keeper only, so a
// cluster that is down ends only the leases of its own tasks. The router
// has the keeper's API; everything the request path, the tunnels, the
// control API and the worker tie ask goes through it. With one cluster
// it adds nothing but the indirection.
//
// The route of a task is the keeper that holds (or recently held) its
// lease, else the first cluster of Rank — the deployment's rendezvous
// order (proxy/cluster.Rank), so the sidecar, ctl and the console agree.
type Router struct {
	names   []string
	keepers map[string]*Keeper
	order   []*Keeper // as names
	rank    func(names []string, taskID string) []string
	clock   clock.Clock
	log     *zap.Logger
	events  *broker          // shared by every keeper: one Subscribe
	stream  *eventstream.Hub // shared: one event id sequence for the contract's stream

	task, profile string // one-task mode (router_onetask.go)
	runCtx        atomic.Value
	reacquiring   atomic.Bool
	claimNext     atomic.Uint32 // where the next claim starts (claims rotate)
}

// Member is one cluster of a Router: its name (the hash's, never
// changed while it holds tasks), the client and the keeper's settings
// (Settings.Cluster is set from Name when several are given).
type Member struct {
	Name     string
	Cluster  Cluster
	Settings Settings
}

// ErrRoute reports a member list a Router cannot be built from.
var ErrRoute = errors.New("leases: invalid cluster list")

// NewRouter builds the keepers of members and the route between them;
// rank orders member names for a task id, owner first (it may be nil with
// one member). One-task mode is taken from the first member's Settings.
func NewRouter(members []Member, rank func(names []string, taskID string) []string) (*Router, error) {
	if len(members) == 0 {
		return nil, fmt.Errorf("%w: no cluster", ErrRoute)
	}
	if len(members) > 1 && rank == nil {
		return nil, fmt.Errorf("%w: several clusters and no rank", ErrRoute)
	}
	s0 := members[0].Settings
	r := &Router{
		keepers: map[string]*Keeper{}, rank: rank, clock: s0.Clock, log: s0.Logger.Named("sidecar"),
		events: newBroker(), stream: eventstream.NewHub(), task: s0.Task, profile: s0.Profile,
	}
	for _, m := range members {
		if _, dup := r.keepers[m.Name]; dup || (m.Name == "" && len(members) > 1) {
			return nil, fmt.Errorf("%w: cluster name %q empty or given twice", ErrRoute, m.Name)
		}
		s := m.Settings
		if len(members) > 1 {
			s.Cluster = m.Name
		}
		k, err := newKeeper(s, m.Cluster, r.events, r.stream)
		if err != nil {
			return nil, err
		}
		r.names = append(r.names, m.Name)
		r.keepers[m.Name] = k
		r.order = append(r.order, k)
	}
	return r, nil
}

// Names lists the clusters, in the order given.
func (r *Router) Names() []string { return append([]string(nil), r.names...) }

// ranked is the keepers in taskID's rendezvous order, owner first.
func (r *Router) ranked(taskID string) []*Keeper {
	if len(r.order) == 1 {
		return r.order
	}
	var out []*Keeper
	for _, n := range r.rank(r.names, taskID) {
		out = append(out, r.keepers[n])
	}
	return out
}

// keeperOf is the keeper a call about taskID goes to: the one holding its
// lease, else one that remembers it, else the owner. taskID "" is the
// only lease held across all keepers (nil when several are, or none).
func (r *Router) keeperOf(taskID string) *Keeper {
	if len(r.order) == 1 {
		return r.order[0]
	}
	if taskID == "" {
		return r.only()
	}
	var remembered *Keeper
	for _, k := range r.order {
		held, gone := k.table.knows(taskID)
		if held {
			return k
		}
		if gone && remembered == nil {
			remembered = k
		}
	}
	if remembered != nil {
		return remembered
	}
	return r.ranked(taskID)[0]
}

// only is the keeper holding the only lease held (or, when none is held,
// the only one that remembers one): nil when that is ambiguous.
func (r *Router) only() *Keeper {
	var holding, remembering []*Keeper
	for _, k := range r.order {
		if n := k.table.count(); n > 0 {
			holding = append(holding, k)
		} else if ref, _ := k.Check(""); ref.TaskID != "" {
			remembering = append(remembering, k)
		}
	}
	switch {
	case len(holding) == 1:
		return holding[0]
	case len(holding) > 1:
		return nil
	case len(remembering) == 1:
		return remembering[0]
	}
	return r.order[0] // nothing held anywhere: it answers "none"
}

// Check returns the lease a request for taskID ("" = the only lease held)
// writes under, and why it may not write now ("" = it may).
func (r *Router) Check(taskID string) (Ref, Reason) {
	k := r.keeperOf(taskID)
	if k == nil {
		return Ref{}, ReasonAmbig
	}
	return k.Check(taskID)
}

// Recheck asks again, right before a send, whether a write under l may
// leave (Keeper.Recheck).
func (r *Router) Recheck(l Ref) (Ref, Reason) { return r.keeperOf(l.TaskID).Recheck(l) }

// Resolve names the task a control call is for (Keeper.Resolve), across
// every cluster when taskID is "".
func (r *Router) Resolve(taskID string) (string, uint64, error) {
	k := r.keeperOf(taskID)
	if k == nil {
		return "", 0, ErrAmbiguousTask
	}
	return k.Resolve(taskID)
}

// SessionFor is the session taskID's calls are made under: its cluster's
// ("" while that cluster has none open).
func (r *Router) SessionFor(taskID string) string {
	if k := r.keeperOf(taskID); k != nil {
		return k.SessionID()
	}
	return ""
}

// ClusterFor is the client of taskID's cluster, for the calls the control
// API makes itself (checkpoint, wait, release) and the journal's.
func (r *Router) ClusterFor(taskID string) Cluster {
	if k := r.keeperOf(taskID); k != nil {
		return k.cluster
	}
	return r.order[0].cluster
}

// ClusterName is the name of taskID's cluster ("" with one cluster).
func (r *Router) ClusterName(taskID string) string {
	if k := r.keeperOf(taskID); k != nil {
		return k.cfg.Cluster
	}
	return ""
}

// ReportBlocked hands a blocked call to its task's cluster's keeper.
func (r *Router) ReportBlocked(b Blocked) {
	if b.TaskID != "" {
		r.keeperOf(b.TaskID).ReportBlocked(b)
	}
}

// NextWrite returns the checkpoint seq and ordinal of the lease's next
// write (Keeper.NextWrite).
func (r *Router) NextWrite(taskID string, epoch uint64) (seq, ordinal uint64, ok bool) {
	return r.keeperOf(taskID).NextWrite(taskID, epoch)
}

// Checkpointed records an acknowledged checkpoint (Keeper.Checkpointed).
func (r *Router) Checkpointed(taskID string, epoch, seq uint64, step string) {
	r.keeperOf(taskID).Checkpointed(taskID, epoch, seq, step)
}

// LostByCluster drops a lease its cluster says the caller no longer holds
// (Keeper.LostByCluster).
func (r *Router) LostByCluster(taskID string, epoch uint64, err error) bool {
	if taskID == "" {
		return false
	}
	return r.keeperOf(taskID).LostByCluster(taskID, epoch, err)
}

// MarkProgress records a progress mark for taskID's lease ("" = the only
// one held); Keeper.MarkProgress.
func (r *Router) MarkProgress(taskID string) (Ref, Reason) {
	k := r.keeperOf(taskID)
	if k == nil {
		return Ref{}, ReasonAmbig
	}
	return k.MarkProgress(taskID)
}

// Drop forgets a lease locally (Keeper.Drop).
func (r *Router) Drop(taskID string, epoch uint64, why Reason, kind EventKind, reason string) {
	r.keeperOf(taskID).Drop(taskID, epoch, why, kind, reason)
}

// Hold blocks a lease's writes while the worker ends it (Keeper.Hold).
func (r *Router) Hold(taskID string, epoch uint64, why Reason) {
	r.keeperOf(taskID).Hold(taskID, epoch, why)
}

// Unhold undoes Hold after the worker's call failed.
func (r *Router) Unhold(taskID string, epoch uint64) { r.keeperOf(taskID).Unhold(taskID, epoch) }

// End ends lease (taskID, epoch) for the worker (Keeper.End).
func (r *Router) End(ctx context.Context, taskID string, epoch uint64, outcome lease.Outcome, reason string) error {
	return r.keeperOf(taskID).End(ctx, taskID, epoch, outcome, reason)
}

// Acquire asks taskID's cluster for its lease, or with claim asks the
// clusters in turn for their most urgent claimable task. A task that its
// owner does not know is looked for in the other clusters first (Rank's
// order) and acquired where it is: a task created before a cluster was
// added keeps its cluster, its epochs and its checkpoints. Only when no
// cluster has it is it created, in its owner; a cluster that cannot be
// asked (no session, an error) stops that creation with its error, since
// it might hold the task.
func (r *Router) Acquire(ctx context.Context, taskID string, claim bool, req api.AcquireRequest) (api.Grant, error) {
	if claim {
		return r.claim(ctx, req)
	}
	if len(r.order) == 1 {
		return r.order[0].Acquire(ctx, taskID, false, req)
	}
	if held, gone := r.keeperOf(taskID).table.knows(taskID); held || gone {
		return r.keeperOf(taskID).Acquire(ctx, taskID, false, req)
	}
	ranked := r.ranked(taskID)
	look := req
	look.Create = false
	for i, k := range ranked {
		g, err := k.Acquire(ctx, taskID, false, look)
		if err == nil || !errors.Is(err, lease.ErrTaskNotFound) {
			if err != nil && req.Create && i > 0 {
				return api.Grant{}, fmt.Errorf("leases: cluster %s, which may hold task %q, did not answer: %w", k.cfg.Cluster, taskID, err)
			}
			return g, err
		}
	}
	if !req.Create {
		return api.Grant{}, fmt.Errorf("leases: task %q in no cluster: %w", taskID, lease.ErrTaskNotFound)
	}
	return ranked[0].Acquire(ctx, taskID, false, req)
}

// claim asks each cluster with a session, starting one further each
// call, for a claimable task; the first grant wins. With none granted,
// "no claimable task" (lease.ErrNoTask) is the answer when any cluster
// gave it, else the first error.
func (r *Router) claim(ctx context.Context, req api.AcquireRequest) (api.Grant, error) {
	n := len(r.order)
	start := int(r.claimNext.Add(1)-1) % n
	var first, none error
	for i := range n {
		k := r.order[(start+i)%n]
		g, err := k.Acquire(ctx, "", true, req)
		switch {
		case err == nil:
			return g, nil
		case errors.Is(err, lease.ErrNoTask):
			none = err
		case first == nil:
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	if none != nil {
		return api.Grant{}, none
	}
	return api.Grant{}, first
}

// sortViews orders views by task id.
func sortViews(v []View) {
	sort.Slice(v, func(i, j int) bool { return v[i].TaskID < v[j].TaskID })
}
