package temporal_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"

	fpworker "github.com/fencepost/fencepost/proxy/worker"
	"github.com/fencepost/fencepost/proxy/worker/internal/fakectl"
	"github.com/fencepost/fencepost/proxy/worker/temporal"
)

func env(t *testing.T, act any) (*testsuite.TestActivityEnvironment, *fakectl.Server) {
	s := fakectl.New()
	url, stop, err := s.Listen()
	require.NoError(t, err)
	t.Cleanup(stop)
	var ts testsuite.WorkflowTestSuite
	e := ts.NewTestActivityEnvironment()
	e.SetWorkerOptions(sdkworker.Options{Interceptors: []interceptor.WorkerInterceptor{temporal.New(fpworker.NewClient(url))}})
	e.RegisterActivity(act)
	return e, s
}

func TestAnActivityRunsUnderALeaseOnItsKey(t *testing.T) {
	var key string
	act := func(ctx context.Context, page int) (int, error) {
		key = temporal.KeyOf(activity.GetInfo(ctx))
		l := temporal.Lease(ctx)
		require.NotNil(t, l)
		require.Equal(t, key, l.TaskID())
		return page + 1, l.Checkpoint(ctx, "page", map[string]int{"page": page})
	}
	e, s := env(t, act)
	v, err := e.ExecuteActivity(act, 3)
	require.NoError(t, err)
	var got int
	require.NoError(t, v.Get(&got))
	require.Equal(t, 4, got)
	require.Equal(t, "completed", s.Task(key).State)
	require.Equal(t, `{"page":3}`, s.Task(key).Data)
}

func TestALostLeaseCancelsTheActivityAndGivesARetryableError(t *testing.T) {
	var key string
	var s *fakectl.Server
	act := func(ctx context.Context) error {
		key = temporal.KeyOf(activity.GetInfo(ctx))
		s.Revoke(key)
		<-ctx.Done()
		return ctx.Err()
	}
	e, fake := env(t, act)
	s = fake
	_, err := e.ExecuteActivity(act)
	require.Error(t, err)
	require.Contains(t, err.Error(), "fencepost lease lost")
	require.Equal(t, "pending", s.Task(key).State, "a retry can take it, under a new epoch")
}

func TestAFailedAttemptGivesTheTaskBackForTheRetry(t *testing.T) {
	var key string
	act := func(ctx context.Context) error {
		key = temporal.KeyOf(activity.GetInfo(ctx))
		return errors.New("flaky")
	}
	e, s := env(t, act)
	_, err := e.ExecuteActivity(act)
	require.ErrorContains(t, err, "flaky")
	require.Equal(t, "pending", s.Task(key).State)
}
