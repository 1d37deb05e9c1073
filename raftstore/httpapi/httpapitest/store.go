// Package httpapitest provides Store, an in-memory, single-process stand-in
// for the raft store, for tests of the HTTP API and of its clients. It runs
// the real lease model (fence/lease), so request-id de-duplication, epochs
// and every model error behave as in the cluster; what it lacks is
// replication, expiry and durability. Faults can be injected per method, and
// a Store can play a follower that answers raftstore.ErrNotLeader.
package httpapitest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/raftstore"
)

// Profile TTLs of the double: the seed's defaults.
var profiles = map[string][2]time.Duration{
	"short":    {20 * time.Second, 7 * time.Second},
	"workflow": {45 * time.Second, 15 * time.Second},
}

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
	mu         sync.Mutex
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
	return &Store{m: lease.New(), faults: map[string][]Fault{}}
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

// apply runs cmd through the model under the lock, stamping time and index
// as the leader would.
func (s *Store) apply(ctx context.Context, method, rid string, cmd *lease.Command) (lease.Result, error) {
	f, err := s.enter(ctx, method, rid, true)
	if err != nil {
		return lease.Result{}, err
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

func profile(name string) (string, time.Duration, time.Duration, error) {
	if name == "" {
		name = "short"
	}
	p, ok := profiles[name]
	if !ok {
		return "", 0, 0, fmt.Errorf("%w: %q", raftstore.ErrUnknownProfile, name)
	}
	return name, p[0], p[1], nil
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// OpenSession implements httpapi.Store.
func (s *Store) OpenSession(ctx context.Context, rid string, req api.OpenSessionRequest) (api.Session, error) {
	if req.SessionID == "" {
		// Derived from the request id, so a retried open names the same session.
		req.SessionID = "s-" + rid
		if rid == "" {
			req.SessionID = "s-" + randomID()
		}
	}
	_, err := s.apply(ctx, "OpenSession", rid, &lease.Command{Op: lease.OpOpenSession,
		SessionID: req.SessionID, WorkerID: req.WorkerID})
	if err != nil {
		return api.Session{}, err
	}
	return api.Session(req), nil
}

// CloseSession implements httpapi.Store.
func (s *Store) CloseSession(ctx context.Context, rid, sessionID string) error {
	_, err := s.apply(ctx, "CloseSession", rid, &lease.Command{Op: lease.OpCloseSession, SessionID: sessionID})
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
	name, ttl, hb, err := profile(req.Profile)
	if err != nil {
		return nil, err
	}
	res, err := s.apply(ctx, "CreateTask", rid, &lease.Command{Op: lease.OpCreateTask, TaskID: req.TaskID,
		Profile: name, TTL: ttl, Heartbeat: hb, Priority: req.Priority, Payload: req.Payload})
	if err != nil {
		return nil, err
	}
	return res.Task, nil
}

func grant(res lease.Result) api.Grant {
	g := api.Grant{InDoubt: res.InDoubt}
	if res.Task != nil {
		g.Task = *res.Task
		g.HeartbeatMs = res.Task.Heartbeat.Milliseconds()
	}
	if res.Lease != nil {
		g.Lease = *res.Lease
		g.ValidForMs = res.Lease.TTL.Milliseconds()
	}
	return g
}

// Acquire implements httpapi.Store.
func (s *Store) Acquire(ctx context.Context, rid, taskID string, req api.AcquireRequest) (api.Grant, error) {
	name, ttl, hb, err := profile(req.Profile)
	if err != nil {
		return api.Grant{}, err
	}
	res, err := s.apply(ctx, "Acquire", rid, &lease.Command{Op: lease.OpAcquire, TaskID: taskID,
		SessionID: req.SessionID, LeaseID: "l-" + rid, Create: req.Create, Profile: name, TTL: ttl,
		Heartbeat: hb, Priority: req.Priority})
	if err != nil {
		return api.Grant{}, err
	}
	return grant(res), nil
}

// Claim implements httpapi.Store.
func (s *Store) Claim(ctx context.Context, rid string, req api.ClaimRequest) (api.Grant, error) {
	res, err := s.apply(ctx, "Claim", rid, &lease.Command{Op: lease.OpClaim, SessionID: req.SessionID,
		LeaseID: "l-" + rid})
	if err != nil {
		return api.Grant{}, err
	}
	return grant(res), nil
}

// Checkpoint implements httpapi.Store.
func (s *Store) Checkpoint(ctx context.Context, rid, taskID string, req api.CheckpointRequest) (*lease.Task, error) {
	res, err := s.apply(ctx, "Checkpoint", rid, &lease.Command{Op: lease.OpCheckpoint, TaskID: taskID,
		SessionID: req.SessionID, Epoch: req.Epoch, Seq: req.Seq, Step: req.Step, Data: req.Data})
	return res.Task, err
}

// Wait implements httpapi.Store.
func (s *Store) Wait(ctx context.Context, rid, taskID string, req api.WaitRequest) (*lease.Task, error) {
	cmd := &lease.Command{Op: lease.OpWait, TaskID: taskID, SessionID: req.SessionID, Epoch: req.Epoch,
		Reason: req.Reason}
	if req.TimeoutMs > 0 {
		cmd.Deadline = time.Now().Add(time.Duration(req.TimeoutMs) * time.Millisecond)
	}
	res, err := s.apply(ctx, "Wait", rid, cmd)
	return res.Task, err
}

// Signal implements httpapi.Store.
func (s *Store) Signal(ctx context.Context, rid, taskID string, req api.SignalRequest) (*lease.Task, error) {
	res, err := s.apply(ctx, "Signal", rid, &lease.Command{Op: lease.OpSignal, TaskID: taskID,
		Payload: req.Payload, Reason: req.Reason})
	return res.Task, err
}

// Release implements httpapi.Store.
func (s *Store) Release(ctx context.Context, rid, taskID string, req api.ReleaseRequest) (*lease.Task, error) {
	res, err := s.apply(ctx, "Release", rid, &lease.Command{Op: lease.OpRelease, TaskID: taskID,
		SessionID: req.SessionID, Epoch: req.Epoch, Outcome: req.Outcome, Result: req.Result, Reason: req.Reason})
	return res.Task, err
}

// Revoke implements httpapi.Store.
func (s *Store) Revoke(ctx context.Context, rid, taskID string, req api.RevokeRequest) (*lease.Task, error) {
	res, err := s.apply(ctx, "Revoke", rid, &lease.Command{Op: lease.OpRevoke, TaskID: taskID,
		Epoch: req.Epoch, Reason: req.Reason})
	return res.Task, err
}

// Cancel implements httpapi.Store.
func (s *Store) Cancel(ctx context.Context, rid, taskID string, req api.CancelRequest) (*lease.Task, error) {
	res, err := s.apply(ctx, "Cancel", rid, &lease.Command{Op: lease.OpCancel, TaskID: taskID, Reason: req.Reason})
	return res.Task, err
}

// DeleteTask implements httpapi.Store.
func (s *Store) DeleteTask(ctx context.Context, rid, taskID string) error {
	_, err := s.apply(ctx, "DeleteTask", rid, &lease.Command{Op: lease.OpDeleteTask, TaskID: taskID})
	return err
}

// Intent implements httpapi.Store.
func (s *Store) Intent(ctx context.Context, rid, taskID string, req api.IntentRequest) (api.IntentResponse, error) {
	res, err := s.apply(ctx, "Intent", rid, &lease.Command{Op: lease.OpIntent, TaskID: taskID,
		SessionID: req.SessionID, Epoch: req.Epoch, Effect: &lease.Effect{Key: req.Key, Method: req.Method,
			URL: req.URL, BodyDigest: req.BodyDigest,
			Deadline: time.Now().Add(time.Duration(req.DeadlineMs) * time.Millisecond)}})
	if err != nil {
		return api.IntentResponse{}, err
	}
	out := api.IntentResponse{}
	if res.Effect != nil {
		out.Effect = *res.Effect
		out.Replay = res.Effect.State == lease.EffectDone
	}
	return out, nil
}

// Outcome implements httpapi.Store.
func (s *Store) Outcome(ctx context.Context, rid, taskID, key string, req api.OutcomeRequest) (lease.Effect, error) {
	res, err := s.apply(ctx, "Outcome", rid, &lease.Command{Op: lease.OpOutcome, TaskID: taskID, Epoch: req.Epoch,
		Effect: &lease.Effect{Key: key, Status: req.Status, Header: req.Header, Body: req.Body}})
	if err != nil || res.Effect == nil {
		return lease.Effect{}, err
	}
	return *res.Effect, nil
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
func (s *Store) Leases(ctx context.Context, stale bool) (api.LeaseList, error) {
	if err := s.read(ctx, "Leases", stale); err != nil {
		return api.LeaseList{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return api.LeaseList{Leases: s.m.LiveLeases()}, nil
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
