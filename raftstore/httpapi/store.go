package httpapi

import (
	"context"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/raftstore"
)

// Store is what the HTTP API needs from the replicated lease store. The
// real *raftstore.Store satisfies it; tests use an in-memory double
// (package httpapitest). Mutating methods take rid, the request id the
// store de-duplicates on, so a client retry after an unknown outcome has its
// effect once.
//
// Errors are raftstore's sentinels (ErrNotLeader makes the server forward
// the request to LeaderHTTP) or wrapped lease sentinels; problems.go maps
// each one to a status and a problem code.
type Store interface {
	OpenSession(ctx context.Context, rid string, req api.OpenSessionRequest) (api.Session, error)
	CloseSession(ctx context.Context, rid, sessionID string) error
	Heartbeat(ctx context.Context, sessionID string, req api.HeartbeatRequest) (api.HeartbeatResponse, error)
	CreateTask(ctx context.Context, rid string, req api.CreateTaskRequest) (*lease.Task, error)
	Acquire(ctx context.Context, rid, taskID string, req api.AcquireRequest) (api.Grant, error)
	Claim(ctx context.Context, rid string, req api.ClaimRequest) (api.Grant, error)
	Checkpoint(ctx context.Context, rid, taskID string, req api.CheckpointRequest) (*lease.Task, error)
	Wait(ctx context.Context, rid, taskID string, req api.WaitRequest) (*lease.Task, error)
	Signal(ctx context.Context, rid, taskID string, req api.SignalRequest) (*lease.Task, error)
	Release(ctx context.Context, rid, taskID string, req api.ReleaseRequest) (*lease.Task, error)
	Revoke(ctx context.Context, rid, taskID string, req api.RevokeRequest) (*lease.Task, error)
	Cancel(ctx context.Context, rid, taskID string, req api.CancelRequest) (*lease.Task, error)
	DeleteTask(ctx context.Context, rid, taskID string) error
	Intent(ctx context.Context, rid, taskID string, req api.IntentRequest) (api.IntentResponse, error)
	Outcome(ctx context.Context, rid, taskID, key string, req api.OutcomeRequest) (lease.Effect, error)
	Task(ctx context.Context, taskID string, stale bool) (*lease.Task, error)
	Tasks(ctx context.Context, f lease.TaskFilter, stale bool) (api.TaskList, error)
	Leases(ctx context.Context, p api.LeasePage, stale bool) (api.LeaseList, error)
	Keys() api.KeyList
	Status() api.ClusterStatus
	Join(ctx context.Context, req api.JoinRequest) error
	Remove(ctx context.Context, id string) error
	IsLeader() bool
	// LeaderHTTP returns the leader's HTTP address ("host:port"), "" when
	// no leader is known.
	LeaderHTTP() string
	Ready() error
}

// The real store must keep satisfying Store.
var _ Store = (*raftstore.Store)(nil)
