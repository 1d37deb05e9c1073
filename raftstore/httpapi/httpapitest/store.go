// Package httpapitest provides Store, an in-memory, single-process stand-in
// for the raft store, for tests of the HTTP API and of its clients. It runs
// the real lease model (fence/lease), so request-id de-duplication, epochs
// and every model error behave as in the cluster; what it lacks is
// replication, expiry and durability. Faults can be injected per method, and
// a Store can play a follower that answers raftstore.ErrNotLeader.
package httpapitest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/raftstore"
)

// Fault is an injected failure of one call. Before the model applies
// anything, Delay is waited (bounded by the call's context); then Err is
// returned — before applying, or after applying when Applied is set (an
// outcome the caller cannot know: raftstore.ErrTimeout's case).
type Fault struct {
	Err     error
	Applied bool
	Delay   time.Duration
}

// Call records one Store call: the method name and its request id ("" for
// methods without one).
type Call struct {
	Method string
	RID    string
}

// Store is an in-memory httpapi.Store. The zero value is not usable; call
// New.
type Store struct {
	mu sync.Mutex
	// cmds is the real store's request-to-command mapping (with the
	// default profiles and limits), so the double validates and maps every
	// request exactly as the cluster does.
	cmds       *raftstore.Commands
	m          *lease.Model
	index      uint64
	follower   bool
	leaderHTTP string
	faults     map[string][]Fault
	calls      []Call
	notReady   error
}

// New returns an empty store that plays the leader.
func New() *Store {
	return &Store{cmds: raftstore.NewCommands(raftstore.Config{}), m: lease.New(), faults: map[string][]Fault{}}
}

// SetFollower makes the store answer every leader-only call with
// raftstore.ErrNotLeader and name leaderHTTP as the leader ("" = unknown);
// SetFollower(false, "") makes it the leader again.
func (s *Store) SetFollower(follower bool, leaderHTTP string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.follower, s.leaderHTTP = follower, leaderHTTP
}

// SetReady sets what Ready returns.
func (s *Store) SetReady(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notReady = err
}

// Inject queues f for the next call of method (a Store method name such as
// "Acquire"); each queued fault is used once, in order.
func (s *Store) Inject(method string, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[method] = append(s.faults[method], f)
}

// Calls returns the calls made so far, in order.
func (s *Store) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// CallsOf returns the request ids of the calls of method, in order.
func (s *Store) CallsOf(method string) []string {
	var out []string
	for _, c := range s.Calls() {
		if c.Method == method {
			out = append(out, c.RID)
		}
	}
	return out
}

// enter records a call and runs its fault, if any. It returns the fault
// to apply after the model ran (Applied faults), or an error to return now.
func (s *Store) enter(ctx context.Context, method, rid string, leaderOnly bool) (*Fault, error) {
	s.mu.Lock()
	s.calls = append(s.calls, Call{Method: method, RID: rid})
	var f *Fault
	if q := s.faults[method]; len(q) > 0 {
		f = &q[0]
		s.faults[method] = q[1:]
	}
	follower := s.follower
	s.mu.Unlock()
	if f != nil && f.Delay > 0 {
		t := time.NewTimer(f.Delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("httpapitest: %s: %w", method, ctx.Err())
		}
	}
	if f != nil && f.Err != nil && !f.Applied {
		return nil, f.Err
	}
	if leaderOnly && follower {
		return nil, raftstore.ErrNotLeader
	}
	if f != nil && f.Err == nil {
		f = nil
	}
	return f, nil
}

// apply runs cmd, as built by s.cmds (buildErr: the error building it
// gave), through the model under the lock, stamping time and index as the
// leader would. The call is recorded and its fault run first, as the
// cluster's HTTP layer would have called the store either way.
func (s *Store) apply(ctx context.Context, method, rid string, cmd *lease.Command, buildErr error) (lease.Result, error) {
	f, err := s.enter(ctx, method, rid, true)
	if err != nil {
		return lease.Result{}, err
	}
	if buildErr != nil {
		return lease.Result{}, buildErr
	}
	s.mu.Lock()
	s.index++
	cmd.RequestID = rid
	cmd.Time = time.Now()
	res := s.m.Apply(s.index, cmd)
	s.mu.Unlock()
	if f != nil {
		return res, f.Err
	}
	return res, res.Err
}

// read runs a read; a follower serves only stale ones.
func (s *Store) read(ctx context.Context, method string, stale bool) error {
	_, err := s.enter(ctx, method, "", !stale)
	return err
}

// OpenSession implements httpapi.Store.
func (s *Store) OpenSession(ctx context.Context, rid string, req api.OpenSessionRequest) (api.Session, error) {
	cmd, err := s.cmds.OpenSession(rid, req)
	if _, err := s.apply(ctx, "OpenSession", rid, cmd, err); err != nil {
		return api.Session{}, err
	}
	return api.Session{SessionID: cmd.SessionID, WorkerID: req.WorkerID}, nil
}

// CloseSession implements httpapi.Store.
func (s *Store) CloseSession(ctx context.Context, rid, sessionID string) error {
	cmd, err := s.cmds.CloseSession(sessionID)
	_, err = s.apply(ctx, "CloseSession", rid, cmd, err)
	return err
}

// Heartbeat implements httpapi.Store: every live lease of the session is
// reported valid for its TTL (the double never expires anything).
func (s *Store) Heartbeat(ctx context.Context, sessionID string, req api.HeartbeatRequest) (api.HeartbeatResponse, error) {
	if _, err := s.enter(ctx, "Heartbeat", "", true); err != nil {
		return api.HeartbeatResponse{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m.Session(sessionID); !ok {
		return api.HeartbeatResponse{}, lease.ErrSessionNotFound
	}
	resp := api.HeartbeatResponse{Leases: []api.LeaseState{}}
	held := map[string]bool{}
	for _, l := range s.m.SessionLeases(sessionID) {
		held[l.TaskID] = true
		st := api.LeaseState{TaskID: l.TaskID, Epoch: l.Epoch, Status: l.Status}
		if l.Status == lease.StatusActive {
			st.ValidForMs = l.TTL.Milliseconds()
			if resp.ValidForMs == 0 || st.ValidForMs < resp.ValidForMs {
				resp.ValidForMs = st.ValidForMs
			}
		} else {
			st.Signal = api.SignalLost
		}
		resp.Leases = append(resp.Leases, st)
	}
	for _, h := range req.Leases {
		if !held[h.TaskID] {
			resp.Leases = append(resp.Leases, api.LeaseState{TaskID: h.TaskID, Epoch: h.Epoch,
				Status: lease.StatusReleased, Signal: api.SignalLost, Reason: "not held by this session"})
		}
	}
	return resp, nil
}

// CreateTask implements httpapi.Store.
func (s *Store) CreateTask(ctx context.Context, rid string, req api.CreateTaskRequest) (*lease.Task, error) {
	cmd, err := s.cmds.CreateTask(req)
	return s.task(ctx, "CreateTask", rid, cmd, err)
}

// task applies a built command and returns the task it left.
func (s *Store) task(ctx context.Context, method, rid string, cmd *lease.Command, buildErr error) (*lease.Task, error) {
	res, err := s.apply(ctx, method, rid, cmd, buildErr)
	if err != nil {
		return nil, err
	}
	return res.Task, nil
}

// grant applies an acquire or claim and builds its Grant as the store
// does, minus the signature (the double signs nothing).
func (s *Store) grant(ctx context.Context, method, rid string, cmd *lease.Command, buildErr error) (api.Grant, error) {
	res, err := s.apply(ctx, method, rid, cmd, buildErr)
	if err != nil {
		return api.Grant{}, err
	}
	g := api.Grant{}
	if res.Task != nil {
		g.Task = *res.Task
		g.HeartbeatMs = res.Task.Heartbeat.Milliseconds()
		for _, e := range res.Task.Journal() {
			if e.State == lease.EffectInDoubt {
				g.InDoubt = append(g.InDoubt, e)
			}
		}
	}
	if res.Lease != nil {
		g.Lease = *res.Lease
		g.ValidForMs = res.Lease.TTL.Milliseconds()
	}
	return g, nil
}

// Acquire implements httpapi.Store.
func (s *Store) Acquire(ctx context.Context, rid, taskID string, req api.AcquireRequest) (api.Grant, error) {
	cmd, err := s.cmds.Acquire(taskID, req)
	return s.grant(ctx, "Acquire", rid, cmd, err)
}

// Claim implements httpapi.Store.
func (s *Store) Claim(ctx context.Context, rid string, req api.ClaimRequest) (api.Grant, error) {
	cmd, err := s.cmds.Claim(req)
	return s.grant(ctx, "Claim", rid, cmd, err)
}

// Checkpoint implements httpapi.Store.
func (s *Store) Checkpoint(ctx context.Context, rid, taskID string, req api.CheckpointRequest) (*lease.Task, error) {
	cmd, err := s.cmds.Checkpoint(taskID, req)
	return s.task(ctx, "Checkpoint", rid, cmd, err)
}

// Wait implements httpapi.Store.
func (s *Store) Wait(ctx context.Context, rid, taskID string, req api.WaitRequest) (*lease.Task, error) {
	cmd, err := s.cmds.Wait(taskID, req, time.Now())
	return s.task(ctx, "Wait", rid, cmd, err)
}

// Signal implements httpapi.Store.
func (s *Store) Signal(ctx context.Context, rid, taskID string, req api.SignalRequest) (*lease.Task, error) {
	cmd, err := s.cmds.Signal(taskID, req)
	return s.task(ctx, "Signal", rid, cmd, err)
}

// Release implements httpapi.Store.
func (s *Store) Release(ctx context.Context, rid, taskID string, req api.ReleaseRequest) (*lease.Task, error) {
	cmd, err := s.cmds.Release(taskID, req)
	return s.task(ctx, "Release", rid, cmd, err)
}

// Revoke implements httpapi.Store.
func (s *Store) Revoke(ctx context.Context, rid, taskID string, req api.RevokeRequest) (*lease.Task, error) {
	cmd, err := s.cmds.Revoke(taskID, req)
	return s.task(ctx, "Revoke", rid, cmd, err)
}

// Cancel implements httpapi.Store.
func (s *Store) Cancel(ctx context.Context, rid, taskID string, req api.CancelRequest) (*lease.Task, error) {
	cmd, err := s.cmds.Cancel(taskID, req)
	return s.task(ctx, "Cancel", rid, cmd, err)
}

// DeleteTask implements httpapi.Store.
func (s *Store) DeleteTask(ctx context.Context, rid, taskID string) error {
	cmd, err := s.cmds.DeleteTask(taskID)
	_, err = s.apply(ctx, "DeleteTask", rid, cmd, err)
	return err
}

// Intent implements httpapi.Store.
func (s *Store) Intent(ctx context.Context, rid, taskID string, req api.IntentRequest) (api.IntentResponse, error) {
	cmd, err := s.cmds.Intent(taskID, req, time.Now())
	res, err := s.apply(ctx, "Intent", rid, cmd, err)
	if err != nil {
		return api.IntentResponse{}, err
	}
	return raftstore.IntentReply(res)
}

// Outcome implements httpapi.Store.
func (s *Store) Outcome(ctx context.Context, rid, taskID, key string, req api.OutcomeRequest) (lease.Effect, error) {
	cmd, err := s.cmds.Outcome(taskID, key, req)
	res, err := s.apply(ctx, "Outcome", rid, cmd, err)
	if err != nil {
		return lease.Effect{}, err
	}
	return raftstore.OutcomeReply(res)
}

// Task implements httpapi.Store.
func (s *Store) Task(ctx context.Context, taskID string, stale bool) (*lease.Task, error) {
	if err := s.read(ctx, "Task", stale); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.m.Task(taskID)
	if !ok {
		return nil, fmt.Errorf("%w: %q", lease.ErrTaskNotFound, taskID)
	}
	return t, nil
}

// Tasks implements httpapi.Store.
func (s *Store) Tasks(ctx context.Context, f lease.TaskFilter, stale bool) (api.TaskList, error) {
	if err := s.read(ctx, "Tasks", stale); err != nil {
		return api.TaskList{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	list := api.TaskList{Tasks: s.m.Tasks(f)}
	if f.Limit > 0 && len(list.Tasks) == f.Limit {
		list.Next = list.Tasks[len(list.Tasks)-1].ID
	}
	return list, nil
}

// Leases implements httpapi.Store.
func (s *Store) Leases(ctx context.Context, p api.LeasePage, stale bool) (api.LeaseList, error) {
	if err := s.read(ctx, "Leases", stale); err != nil {
		return api.LeaseList{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	list := api.LeaseList{Leases: s.m.LiveLeasesPage(p.After, p.Limit)}
	if p.Limit > 0 && len(list.Leases) == p.Limit {
		list.Next = list.Leases[len(list.Leases)-1].TaskID
	}
	return list, nil
}

// Keys implements httpapi.Store; the double signs nothing.
func (s *Store) Keys() api.KeyList { return api.KeyList{Keys: []api.PublicKey{}} }

// Status implements httpapi.Store.
func (s *Store) Status() api.ClusterStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := api.ClusterStatus{NodeID: "test", State: "Leader", AppliedIndex: s.index, CommitIndex: s.index,
		LeaderHTTP: s.leaderHTTP, Members: []api.Member{}}
	if s.follower {
		st.State = "Follower"
	}
	return st
}

// Join implements httpapi.Store; it only records the call.
func (s *Store) Join(ctx context.Context, req api.JoinRequest) error {
	_, err := s.enter(ctx, "Join", "", true)
	return err
}

// Remove implements httpapi.Store; it only records the call.
func (s *Store) Remove(ctx context.Context, id string) error {
	_, err := s.enter(ctx, "Remove", "", true)
	return err
}

// IsLeader implements httpapi.Store.
func (s *Store) IsLeader() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.follower
}

// LeaderHTTP implements httpapi.Store.
func (s *Store) LeaderHTTP() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leaderHTTP
}

// Ready implements httpapi.Store.
func (s *Store) Ready() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.notReady
}
