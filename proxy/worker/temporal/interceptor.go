// Package temporal runs Temporal activities under fencepost leases: a
// worker interceptor that holds, for each activity attempt, the lease on a
// task keyed by the workflow and activity ids (worker.Run), so two
// attempts of one activity (a retry racing a slow first attempt, a worker
// that Temporal thinks dead) never run at once, each attempt's tool calls
// carry its own fencing token through the sidecar, and a retry resumes from
// the last checkpoint. The activity's context is cancelled the moment the
// lease is lost. It is its own module so the main module does not depend on
// the Temporal SDK.
//
//	w := worker.New(c, "queue", worker.Options{
//		Interceptors: []interceptor.WorkerInterceptor{temporal.New(fpworker.FromEnv())},
//	})
//	// in an activity: l := temporal.Lease(ctx); l.Checkpoint(ctx, "step", data)
package temporal

import (
	"context"
	"errors"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	sdktemporal "go.temporal.io/sdk/temporal"

	fpworker "github.com/fencepost/fencepost/proxy/worker"
)

// Interceptor is a Temporal worker interceptor; make one with New.
type Interceptor struct {
	interceptor.WorkerInterceptorBase
	client *fpworker.Client
	// Key names the fencepost task of an activity attempt; every attempt
	// of one activity must get the same key. Default: KeyOf.
	Key func(activity.Info) string
}

// New returns an interceptor that holds leases through c.
func New(c *fpworker.Client) *Interceptor { return &Interceptor{client: c, Key: KeyOf} }

// KeyOf is the default task key: "temporal/<workflow id>/<run id>/<activity id>".
func KeyOf(in activity.Info) string {
	return "temporal/" + in.WorkflowExecution.ID + "/" + in.WorkflowExecution.RunID + "/" + in.ActivityID
}

// InterceptActivity wraps every activity the worker runs.
func (i *Interceptor) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	a := &inbound{i: i}
	a.Next = next
	return a
}

type inbound struct {
	interceptor.ActivityInboundInterceptorBase
	i *Interceptor
}

type leaseKey struct{}

// Lease is the lease the running activity attempt holds, nil outside one.
func Lease(ctx context.Context) *fpworker.Lease {
	l, _ := ctx.Value(leaseKey{}).(*fpworker.Lease)
	return l
}

// ExecuteActivity runs the attempt under the lease. The attempt's error
// gives the task back (Temporal decides whether to retry, and the retry
// takes it under a new epoch); a lost lease is a retryable error matching
// fpworker.ErrLeaseLost; success completes the task.
func (a *inbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	var out any
	err := a.i.client.Run(ctx, a.i.Key(activity.GetInfo(ctx)), func(ctx context.Context, l *fpworker.Lease) error {
		var err error
		out, err = a.Next.ExecuteActivity(context.WithValue(ctx, leaseKey{}, l), in)
		return err
	}, fpworker.WithCreate(), fpworker.WithOnError(fpworker.GiveBackTask))
	if errors.Is(err, fpworker.ErrLeaseLost) {
		return nil, sdktemporal.NewApplicationErrorWithCause("fencepost lease lost", "FencepostLeaseLost", err)
	}
	return out, err
}
