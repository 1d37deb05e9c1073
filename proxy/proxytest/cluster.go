package proxytest

import (
	"context"
	"sync"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

// Lease is the fake cluster's record of one live lease.
type Lease struct {
	Epoch  uint64
	Sid    string
	Signal string // delivered on the next heartbeat
	Status lease.Status
}

// Cluster is an in-memory test double of the lease cluster.
type Cluster struct {
	Mu        sync.Mutex
	NextEpoch uint64
	NextSess  int
	ValidFor  time.Duration
	HbEvery   time.Duration
	Signature string
	Leases    map[string]*Lease
	Ckpt      map[string]*lease.Checkpoint
	HbCalls   []api.HeartbeatRequest
	HbErr     error         // when set, heartbeats fail
	HbBlock   chan struct{} // when set, heartbeats block until it is closed
	InFlight  int
	MaxFlight int
	Releases  []api.ReleaseRequest
	RelErr    error // when set, Release fails with it
	Closed    []string
}

// NewCluster returns a cluster that grants epochs from 101, valid for
// 10s with a 3s heartbeat.
func NewCluster() *Cluster {
	return &Cluster{
		NextEpoch: 100, ValidFor: 10 * time.Second, HbEvery: 3 * time.Second,
		Leases: make(map[string]*Lease), Ckpt: make(map[string]*lease.Checkpoint),
	}
}

// OpenSession is the cluster call of the same name.
func (f *Cluster) OpenSession(_ context.Context, req api.OpenSessionRequest) (api.Session, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.NextSess++
	return api.Session{SessionID: "s" + string(rune('0'+f.NextSess)), WorkerID: req.WorkerID}, nil
}

// CloseSession is the cluster call of the same name.
func (f *Cluster) CloseSession(_ context.Context, sid string) error {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.Closed = append(f.Closed, sid)
	return nil
}

// HeartbeatOnce is the cluster call of the same name.
func (f *Cluster) HeartbeatOnce(ctx context.Context, sid string, req api.HeartbeatRequest) (api.HeartbeatResponse, error) {
	f.Mu.Lock()
	f.HbCalls = append(f.HbCalls, req)
	f.InFlight++
	if f.InFlight > f.MaxFlight {
		f.MaxFlight = f.InFlight
	}
	block, hbErr := f.HbBlock, f.HbErr
	f.Mu.Unlock()
	defer func() {
		f.Mu.Lock()
		f.InFlight--
		f.Mu.Unlock()
	}()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return api.HeartbeatResponse{}, ctx.Err()
		}
	}
	if hbErr != nil {
		return api.HeartbeatResponse{}, hbErr
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	resp := api.HeartbeatResponse{ValidForMs: f.ValidFor.Milliseconds()}
	for _, h := range req.Leases {
		l := f.Leases[h.TaskID]
		switch {
		case l == nil:
			resp.Leases = append(resp.Leases, api.LeaseState{TaskID: h.TaskID, Epoch: h.Epoch, Status: lease.StatusExpired, Signal: api.SignalLost})
		case l.Epoch != h.Epoch || l.Sid != sid:
			resp.Leases = append(resp.Leases, api.LeaseState{TaskID: h.TaskID, Epoch: l.Epoch, Status: lease.StatusActive, Signal: api.SignalLost})
		case l.Signal != "":
			resp.Leases = append(resp.Leases, api.LeaseState{TaskID: h.TaskID, Epoch: l.Epoch, Status: l.Status, Signal: l.Signal})
			if l.Signal != api.SignalRevived {
				delete(f.Leases, h.TaskID)
			} else {
				resp.Leases[len(resp.Leases)-1].ValidForMs = f.ValidFor.Milliseconds()
				l.Signal, l.Status = "", lease.StatusActive
			}
		default:
			resp.Leases = append(resp.Leases, api.LeaseState{TaskID: h.TaskID, Epoch: l.Epoch, Status: lease.StatusActive, ValidForMs: f.ValidFor.Milliseconds()})
		}
	}
	return resp, nil
}

func (f *Cluster) grantLocked(taskID, sid string) api.Grant {
	f.NextEpoch++
	f.Leases[taskID] = &Lease{Epoch: f.NextEpoch, Sid: sid, Status: lease.StatusActive}
	task := lease.Task{ID: taskID, State: lease.TaskLeased, MaxEpoch: f.NextEpoch}
	if cp := f.Ckpt[taskID]; cp != nil {
		c := *cp
		task.Checkpoint = &c
	}
	return api.Grant{
		Lease:          lease.Lease{TaskID: taskID, Epoch: f.NextEpoch, SessionID: sid, Status: lease.StatusActive},
		Task:           task,
		ValidForMs:     f.ValidFor.Milliseconds(),
		HeartbeatMs:    f.HbEvery.Milliseconds(),
		TokenSignature: f.Signature,
	}
}

// Acquire is the cluster call of the same name.
func (f *Cluster) Acquire(_ context.Context, taskID string, req api.AcquireRequest) (api.Grant, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if l := f.Leases[taskID]; l != nil && l.Sid != req.SessionID {
		return api.Grant{}, lease.ErrLeaseHeld
	}
	return f.grantLocked(taskID, req.SessionID), nil
}

// Claim is the cluster call of the same name.
func (f *Cluster) Claim(_ context.Context, req api.ClaimRequest) (api.Grant, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return f.grantLocked("claimed", req.SessionID), nil
}

// Current checks that taskID is held by sid under epoch (call with Mu held).
func (f *Cluster) Current(taskID, sid string, epoch uint64) error {
	l := f.Leases[taskID]
	if l == nil || l.Epoch != epoch || l.Sid != sid {
		return lease.ErrStaleEpoch
	}
	return nil
}

// Checkpoint is the cluster call of the same name.
func (f *Cluster) Checkpoint(_ context.Context, taskID string, req api.CheckpointRequest) (*lease.Task, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if err := f.Current(taskID, req.SessionID, req.Epoch); err != nil {
		return nil, err
	}
	cp := f.Ckpt[taskID]
	seq := uint64(1)
	if cp != nil {
		seq = cp.Seq + 1
	}
	if req.Seq != 0 {
		seq = req.Seq
	}
	f.Ckpt[taskID] = &lease.Checkpoint{Seq: seq, Step: req.Step, Data: req.Data, Epoch: req.Epoch}
	c := *f.Ckpt[taskID]
	return &lease.Task{ID: taskID, Checkpoint: &c}, nil
}

// Wait is the cluster call of the same name.
func (f *Cluster) Wait(_ context.Context, taskID string, req api.WaitRequest) (*lease.Task, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if err := f.Current(taskID, req.SessionID, req.Epoch); err != nil {
		return nil, err
	}
	delete(f.Leases, taskID)
	return &lease.Task{ID: taskID, State: lease.TaskWaiting}, nil
}

// Release is the cluster call of the same name.
func (f *Cluster) Release(_ context.Context, taskID string, req api.ReleaseRequest) (*lease.Task, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if f.RelErr != nil {
		return nil, f.RelErr
	}
	if err := f.Current(taskID, req.SessionID, req.Epoch); err != nil {
		return nil, err
	}
	delete(f.Leases, taskID)
	f.Releases = append(f.Releases, req)
	return &lease.Task{ID: taskID, State: lease.TaskPending}, nil
}

// Signal queues a signal for the next heartbeat about taskID.
func (f *Cluster) Signal(taskID, sig string, st lease.Status) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if l := f.Leases[taskID]; l != nil {
		l.Signal, l.Status = sig, st
	}
}

// Heartbeats returns the heartbeats received so far.
func (f *Cluster) Heartbeats() []api.HeartbeatRequest {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return append([]api.HeartbeatRequest(nil), f.HbCalls...)
}
