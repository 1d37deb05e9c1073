package leases

import (
	"context"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

// Cluster is what the sidecar needs from the lease cluster. The
// *cluster.Client of package proxy/cluster satisfies it; tests use a
// double. Errors are matched with errors.Is against the lease sentinels
// (lease.ErrStaleEpoch, lease.ErrSessionNotFound, ...).
type Cluster interface {
	OpenSession(ctx context.Context, req api.OpenSessionRequest) (api.Session, error)
	CloseSession(ctx context.Context, sid string) error
	// HeartbeatOnce makes a single attempt; the sidecar does its own
	// retrying so exactly one heartbeat is in flight.
	HeartbeatOnce(ctx context.Context, sid string, req api.HeartbeatRequest) (api.HeartbeatResponse, error)
	Acquire(ctx context.Context, taskID string, req api.AcquireRequest) (api.Grant, error)
	Claim(ctx context.Context, req api.ClaimRequest) (api.Grant, error)
	Checkpoint(ctx context.Context, taskID string, req api.CheckpointRequest) (*lease.Task, error)
	Wait(ctx context.Context, taskID string, req api.WaitRequest) (*lease.Task, error)
	Release(ctx context.Context, taskID string, req api.ReleaseRequest) (*lease.Task, error)
}
