package console

import (
	"context"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

// Cluster is what the console needs of the cluster's API; the Go client
// (proxy/cluster) satisfies it, as `fencepost ctl` uses it.
type Cluster interface {
	Tasks(ctx context.Context, f lease.TaskFilter, stale bool) (api.TaskList, error)
	TaskSummary(ctx context.Context, taskID string, stale bool) (*lease.Task, error)
	TaskHistory(ctx context.Context, taskID string) (api.TaskHistory, error)
	WatchEvents(ctx context.Context, since uint64, wait time.Duration) (api.EventFeed, error)
	Leases(ctx context.Context, stale bool) (api.LeaseList, error)
	Sessions(ctx context.Context, after string, limit int) (api.SessionList, error)
	Status(ctx context.Context) (api.ClusterStatus, error)
	// Ready asks one member (its HTTP address) whether it has a leader
	// and is caught up (GET /readyz).
	Ready(ctx context.Context, endpoint string) error
	Revoke(ctx context.Context, taskID string, req api.RevokeRequest) (*lease.Task, error)
	Cancel(ctx context.Context, taskID string, req api.CancelRequest) (*lease.Task, error)
	Signal(ctx context.Context, taskID string, req api.SignalRequest) (*lease.Task, error)
}
