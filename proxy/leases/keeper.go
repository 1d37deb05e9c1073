package leases

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/clock"
	"github.com/fencepost/fencepost/proxy/eventstream"
)

// Keeper keeps the sidecar's leases: it owns the session, the heartbeat
// loop, the session watch, the watchdog and the lease table, behind a
// small API — check (may this request write now), acquire, hold/unhold,
// drop, subscribe. Everything that changes a lease goes through it, so it
// is the one place that cuts connections and publishes events.
type Keeper struct {
	cfg     Settings
	cluster Cluster
	log     *zap.Logger
	clock   clock.Clock
	metrics *metrics
	table   *leaseTable
	events  *broker
	// stream is the control API's event stream (package eventstream);
	// progress, handover, runCtx and reacquiring serve the worker tie
	// (worker.go).
	stream   *eventstream.Hub
	progress progressMarks
	handover handovers
	// ownStreams: events and stream are this keeper's own (New), closed
	// by CloseSession; a Router's keepers share the router's.
	ownStreams bool

	sid atomic.Value // string: the open session's id, "" while none
	// failing: the last heartbeat failed (the cluster may be down);
	// Router.Clusters reports it.
	failing atomic.Bool

	wake wakeups
	// reports are the blocked writes waiting to be reported (blocked.go);
	// reportsOff: the cluster takes none.
	reports    blockReports
	reportsOff atomic.Bool
}

// wakeups are the keeper's loops' doorbells. A change of the lease set
// rings all three; a watch that saw a change also asks for a heartbeat
// now.
type wakeups struct {
	hb    chan struct{} // recompute the heartbeat schedule
	hbNow atomic.Bool   // with hb: send a heartbeat now
	watch chan struct{} // start or stop watching
	dog   chan struct{} // recompute the watchdog timer
}

func ring(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// New builds a keeper of one cluster that talks to it through c and
// registers its metrics with s.Registerer. Nothing is started (Run).
// One-task mode (Settings.Task) is the Router's: a keeper alone ignores it.
func New(s Settings, c Cluster) (*Keeper, error) {
	k, err := newKeeper(s, c, newBroker(), eventstream.NewHub())
	if err != nil {
		return nil, err
	}
	k.ownStreams = true
	return k, nil
}

// newKeeper builds a keeper that publishes to events and stream.
func newKeeper(s Settings, c Cluster, events *broker, stream *eventstream.Hub) (*Keeper, error) {
	table := newLeaseTable(s.Drift, s.MarginFloor)
	m, err := newMetrics(s.Registerer, s.Clock, table)
	if err != nil {
		return nil, err
	}
	log := s.Logger.Named("sidecar")
	if s.Cluster != "" {
		log = log.With(zap.String("cluster", s.Cluster))
	}
	return &Keeper{
		cfg: s, cluster: c, log: log, clock: s.Clock, metrics: m,
		table:  table,
		events: events,
		stream: stream,
		wake: wakeups{
			hb: make(chan struct{}, 1), watch: make(chan struct{}, 1), dog: make(chan struct{}, 1),
		},
		reports: blockReports{wake: make(chan struct{}, 1)},
	}, nil
}

// Run starts the keeper's loops under ctx; go starts one goroutine the
// caller waits for.
func (k *Keeper) Run(ctx context.Context, goLoop func(func())) {
	goLoop(func() { k.runHeartbeat(ctx) })
	goLoop(func() { k.runWatchdog(ctx) })
	if w, ok := k.cluster.(sessionWatcher); ok {
		goLoop(func() { k.runWatch(ctx, w) })
	}
	if r, ok := k.cluster.(blockReporter); ok {
		goLoop(func() { k.runBlockReports(ctx, r) })
	}
}

// Check returns the lease a request for taskID ("" = the only lease held)
// writes under, and why it may not write now ("" = it may).
func (k *Keeper) Check(taskID string) (Ref, Reason) {
	return k.table.current(taskID, k.clock.Now())
}

// Recheck asks again, right before a send, whether a write under l may
// leave: l's generation, or a newer one of the same epoch. It returns the
// lease to stamp.
func (k *Keeper) Recheck(l Ref) (Ref, Reason) {
	now, err := k.table.current(l.TaskID, k.clock.Now())
	if err == "" && now.Epoch != l.Epoch {
		return now, ReasonLost
	}
	return now, err
}

// SessionID is the open session's id, "" while none is open.
func (k *Keeper) SessionID() string {
	sid, _ := k.sid.Load().(string)
	return sid
}

// SessionFor is the session a task's calls are made under: a keeper has
// one, whatever the task.
func (k *Keeper) SessionFor(string) string { return k.SessionID() }

func (k *Keeper) setSession(sid string) { k.sid.Store(sid) }

// Subscribe returns a channel of lease events and a cancel function.
func (k *Keeper) Subscribe() (<-chan Event, func()) { return k.events.subscribe() }

// Views is the local view of every held lease.
func (k *Keeper) Views() []View { return k.table.views(k.clock.Now()) }

// publish records and fans out a lease event.
func (k *Keeper) publish(kind EventKind, taskID string, epoch uint64, why string) {
	k.metrics.leaseEvents.WithLabelValues(string(kind)).Inc()
	if ce := k.log.Check(zap.InfoLevel, "lease event"); ce != nil {
		ce.Write(zap.String("kind", string(kind)), zap.String("task", taskID), zap.Uint64("epoch", epoch), zap.String("reason", why))
	}
	ev := Event{Kind: kind, TaskID: taskID, Epoch: epoch, Reason: why, At: k.clock.Now()}
	k.events.publish(ev)
	k.stream.Publish(StreamEvent(ev))
	k.cfg.Tracer.LeaseEvent(string(kind), taskID, epoch, why)
}

// cut closes what a transition severed.
func (k *Keeper) cut(c severed) {
	if n := c.close(); n > 0 {
		k.metrics.tunnelsCut.Add(float64(n))
	}
}

// changed wakes every loop after the lease set changed.
func (k *Keeper) changed() {
	ring(k.wake.hb)
	ring(k.wake.dog)
	ring(k.wake.watch)
}

// Drop forgets a lease locally, cuts its connections and publishes.
func (k *Keeper) Drop(taskID string, epoch uint64, r Reason, kind EventKind, why string) {
	c, ep, ok := k.table.drop(taskID, epoch, r)
	if !ok {
		return
	}
	k.cut(c)
	k.publish(kind, taskID, ep, why)
	k.changed()
}

// Hold blocks a lease's writes and cuts what is in flight while the
// worker ends it (r says how).
func (k *Keeper) Hold(taskID string, epoch uint64, r Reason) {
	if c, ok := k.table.hold(taskID, epoch, r); ok {
		k.cut(c)
	}
}

// Unhold undoes hold after the worker's call failed.
func (k *Keeper) Unhold(taskID string, epoch uint64) {
	k.table.unhold(taskID, epoch, k.clock.Now())
}

// LostByCluster drops a lease the cluster says the caller no longer holds
// (stale epoch, not holder, not active): the cluster knows better than
// the local deadline.
func (k *Keeper) LostByCluster(taskID string, epoch uint64, err error) bool {
	if taskID == "" || epoch == 0 ||
		!(errors.Is(err, lease.ErrStaleEpoch) || errors.Is(err, lease.ErrNotHolder) || errors.Is(err, lease.ErrLeaseNotActive)) {
		return false
	}
	k.Drop(taskID, epoch, ReasonLost, EventLost, err.Error())
	return true
}

// openSession opens the sidecar's one session with the cluster.
func (k *Keeper) openSession(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, k.cfg.ClusterTimeout)
	defer cancel()
	sess, err := k.cluster.OpenSession(cctx, api.OpenSessionRequest{WorkerID: k.cfg.WorkerID})
	if err != nil {
		return err
	}
	k.setSession(sess.SessionID)
	k.log.Info("session open", zap.String("session", sess.SessionID))
	return nil
}

// sessionLost forgets the session and every lease held through it; the
// heartbeat loop opens a new session, and the worker must acquire again.
func (k *Keeper) sessionLost(why string) {
	k.setSession("")
	for _, l := range k.table.dropAll(ReasonLost) {
		k.cut(l.cut)
		k.publish(EventLost, l.taskID, l.epoch, why)
	}
	k.changed()
}

// Acquire asks the cluster for a named task's lease (or, with claim, for
// the most urgent claimable task) and records the grant. The local
// deadline counts from the moment the request was sent.
func (k *Keeper) Acquire(ctx context.Context, taskID string, claim bool, req api.AcquireRequest) (api.Grant, error) {
	sid := k.SessionID()
	if sid == "" {
		return api.Grant{}, ErrNoSession
	}
	cctx, cancel := context.WithTimeout(ctx, k.cfg.ClusterTimeout)
	defer cancel()
	sent := k.clock.Now()
	var g api.Grant
	var err error
	if claim {
		g, err = k.cluster.Claim(cctx, api.ClaimRequest{SessionID: sid})
	} else {
		req.SessionID = sid
		g, err = k.cluster.Acquire(cctx, taskID, req)
	}
	if err != nil {
		if errors.Is(err, lease.ErrSessionNotFound) {
			k.sessionLost("session not found")
		}
		return api.Grant{}, err
	}
	if g.Lease.TaskID == "" && g.Task.ID == "" {
		return api.Grant{}, fmt.Errorf("proxy: cluster returned a grant without a task id")
	}
	ref, c := k.table.grant(g, sent, k.clock.Now())
	k.handover.put(ref, g)
	k.cut(c)
	k.publish(EventAcquired, ref.TaskID, ref.Epoch, "")
	k.changed()
	return g, nil
}

// Ready reports the keeper's part of readiness: a session.
func (k *Keeper) Ready() (bool, string) {
	if k.SessionID() == "" {
		return false, "no cluster session"
	}
	return true, "ok"
}

// GiveBackAll releases every held lease as given back, so reclaim is
// immediate instead of waiting for expiry, and drops it locally even when
// the cluster cannot be reached (the lease then expires on its own).
func (k *Keeper) GiveBackAll(ctx context.Context) {
	sid := k.SessionID()
	for _, v := range k.Views() {
		if sid != "" {
			cctx, cancel := context.WithTimeout(ctx, k.cfg.ClusterTimeout)
			_, err := k.cluster.Release(cctx, v.TaskID, api.ReleaseRequest{
				SessionID: sid, Epoch: v.Epoch, Outcome: lease.OutcomeGivenBack, Reason: "sidecar shutdown",
			})
			cancel()
			if err != nil {
				k.log.Warn("give back on shutdown", zap.String("task", v.TaskID), zap.Error(err))
			}
		}
		k.Drop(v.TaskID, v.Epoch, ReasonReleased, EventReleased, "sidecar shutdown")
	}
}

// CloseSession closes the session at the cluster, bounded by
// ClusterTimeout, and ends every subscription of a keeper built by New
// (a Router ends its own once every keeper closed).
func (k *Keeper) CloseSession(ctx context.Context) {
	if sid := k.SessionID(); sid != "" {
		cctx, cancel := context.WithTimeout(ctx, k.cfg.ClusterTimeout)
		if err := k.cluster.CloseSession(cctx, sid); err != nil {
			k.log.Warn("close session", zap.Error(err))
		}
		cancel()
	}
	if k.ownStreams {
		k.events.close()
		k.stream.Close()
	}
}

// sleep waits d on the keeper's clock. It returns true when woken early
// through wake, false when d passed or ctx ended.
func (k *Keeper) sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	t := k.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return false
	case <-wake:
		return true
	}
}
