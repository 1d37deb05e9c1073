package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/proxy/worker"
	"github.com/fencepost/fencepost/proxy/worker/internal/fakectl"
)

func fake(t *testing.T) (*fakectl.Server, *worker.Client) {
	t.Helper()
	s := fakectl.New()
	url, stop, err := s.Listen()
	require.NoError(t, err)
	t.Cleanup(stop)
	return s, worker.NewClient(url)
}

// eventually polls cond until it holds or 10 s pass.
func eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRunHoldsAttachAndCompletesOnReturn(t *testing.T) {
	s, c := fake(t)
	err := c.Run(t.Context(), "t1", func(ctx context.Context, l *worker.Lease) error {
		require.Equal(t, uint64(1), l.Epoch())
		require.Nil(t, l.ResumedFrom())
		require.Equal(t, 1, s.Task("t1").Attached, "the block keeps /v1/attach?task=t1 open")
		require.NoError(t, l.Checkpoint(ctx, "page-1", map[string]int{"page": 1}))
		require.NoError(t, l.Progress(ctx))
		return nil
	}, worker.WithCreate())
	require.NoError(t, err)
	in := s.Task("t1")
	require.Equal(t, "completed", in.State)
	require.Equal(t, `{"page":1}`, in.Data)
	require.Equal(t, 2, in.Progress)
	eventually(t, func() bool { return s.Task("t1").Attached == 0 }, "the attach stream to close after complete")
	require.Equal(t, "completed", s.Task("t1").State, "a clean close after complete changes nothing")
}

func TestStopEventCancelsTheWorkAtOnce(t *testing.T) {
	for _, kind := range []string{"revoked", "lost"} {
		t.Run(kind, func(t *testing.T) {
			s, c := fake(t)
			var seen []worker.Event
			var after error
			err := c.Run(t.Context(), "t1", func(ctx context.Context, l *worker.Lease) error {
				if kind == "revoked" {
					s.Revoke("t1")
				} else {
					s.Lose("t1")
				}
				select {
				case <-ctx.Done():
				case <-time.After(10 * time.Second):
					t.Fatal("ctx was not cancelled by the stop event")
				}
				<-l.Lost()
				require.ErrorIs(t, context.Cause(ctx), worker.ErrLeaseLost)
				after = l.Checkpoint(context.Background(), "late", 1)
				return ctx.Err()
			}, worker.WithCreate(), worker.WithEvents(func(ev worker.Event) { seen = append(seen, ev) }))
			require.ErrorIs(t, err, worker.ErrLeaseLost)
			require.ErrorIs(t, after, worker.ErrLeaseLost, "the next SDK call reports the loss")
			require.Equal(t, "pending", s.Task("t1").State, "a lost lease is not failed or completed by the SDK")
			require.Equal(t, worker.EventState, seen[0].Kind, "the stream starts with the state")
			require.Equal(t, worker.EventKind(kind), seen[len(seen)-1].Kind)
			require.True(t, seen[len(seen)-1].Stop)
		})
	}
}

func TestWorkErrorFailsOrGivesBackNeverCompletes(t *testing.T) {
	s, c := fake(t)
	boom := errors.New("boom")
	err := c.Run(t.Context(), "t1", func(context.Context, *worker.Lease) error { return boom }, worker.WithCreate())
	require.ErrorIs(t, err, boom)
	require.Equal(t, "failed", s.Task("t1").State)
	require.Equal(t, "boom", s.Task("t1").Reason)

	err = c.Run(t.Context(), "t2", func(context.Context, *worker.Lease) error { return boom },
		worker.WithCreate(), worker.WithOnError(worker.GiveBackTask))
	require.ErrorIs(t, err, boom)
	require.Equal(t, "pending", s.Task("t2").State)

	require.Panics(t, func() {
		_ = c.Run(t.Context(), "t3", func(context.Context, *worker.Lease) error { panic("oops") }, worker.WithCreate())
	})
	require.Equal(t, "failed", s.Task("t3").State)
}

func TestCancelledByTheCallerGivesBack(t *testing.T) {
	s, c := fake(t)
	ctx, cancel := context.WithCancel(t.Context())
	err := c.Run(ctx, "t1", func(ctx context.Context, l *worker.Lease) error {
		cancel() // a shutdown
		<-ctx.Done()
		return ctx.Err()
	}, worker.WithCreate())
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, "pending", s.Task("t1").State, "given back, not failed")
}

func TestClaimResumesFromCheckpointUnderHigherEpoch(t *testing.T) {
	s, c := fake(t)
	var first uint64
	err := c.Run(t.Context(), "t1", func(ctx context.Context, l *worker.Lease) error {
		first = l.Epoch()
		require.NoError(t, l.Checkpoint(ctx, "page-3", map[string]int{"page": 3}))
		s.Revoke("t1")
		<-ctx.Done()
		return ctx.Err()
	}, worker.WithCreate())
	require.ErrorIs(t, err, worker.ErrLeaseLost)
	err = c.RunNext(t.Context(), func(ctx context.Context, l *worker.Lease) error {
		require.Equal(t, "t1", l.TaskID())
		require.Greater(t, l.Epoch(), first)
		require.JSONEq(t, `{"page":3}`, string(l.ResumedFrom()))
		return l.Complete(ctx, map[string]string{"ok": "yes"})
	})
	require.NoError(t, err)
	require.JSONEq(t, `{"ok":"yes"}`, s.Task("t1").Result)
	err = c.RunNext(t.Context(), func(context.Context, *worker.Lease) error { return nil })
	require.ErrorIs(t, err, worker.ErrNoTask)
}

func TestWaitExternalResumesOnSignal(t *testing.T) {
	s, c := fake(t)
	err := c.Run(t.Context(), "t1", func(ctx context.Context, l *worker.Lease) error {
		e1 := l.Epoch()
		go func() {
			eventually(t, func() bool { return s.Task("t1").State == "waiting" }, "the task to wait")
			s.Signal("t1", []byte(`{"approved":true}`))
		}()
		sig, err := l.WaitExternal(ctx, time.Minute)
		require.NoError(t, err)
		require.JSONEq(t, `{"approved":true}`, string(sig))
		require.Greater(t, l.Epoch(), e1, "resumed under a new epoch")
		require.Equal(t, 1, s.Task("t1").Attached, "attached again for the new epoch")
		return nil
	}, worker.WithCreate())
	require.NoError(t, err)
	require.Equal(t, "completed", s.Task("t1").State)
}

// A stop for the epoch the worker is ending itself (here a wait) is the
// sidecar seeing that end, not a loss of the next epoch.
func TestStopDuringTheWorkersOwnEndIsNotALoss(t *testing.T) {
	s, c := fake(t)
	s.WaitReportsLost()
	err := c.Run(t.Context(), "t1", func(ctx context.Context, l *worker.Lease) error {
		s.Signal("t1", []byte(`"ok"`))
		_, err := l.WaitExternal(ctx, time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Checkpoint(ctx, "after", 1))
		return ctx.Err()
	}, worker.WithCreate())
	require.NoError(t, err)
	require.Equal(t, "completed", s.Task("t1").State)
}

func TestReconnectReplaysEventsMissedMeanwhile(t *testing.T) {
	s, c := fake(t)
	err := c.Run(t.Context(), "t1", func(ctx context.Context, l *worker.Lease) error {
		s.Drop(true) // the stream ends; reconnects are refused for now
		s.Revoke("t1")
		s.Resume()
		<-ctx.Done()
		return nil
	}, worker.WithCreate())
	require.ErrorIs(t, err, worker.ErrLeaseLost)
	ids, replayed := s.Streams()
	require.GreaterOrEqual(t, replayed, 1, "the revoke was served from the ring")
	require.NotEmpty(t, ids[len(ids)-1], "the reconnect sent Last-Event-ID")
}

func TestSidecarRestart(t *testing.T) {
	s, c := fake(t)
	// Restarted still holding the lease: the state says so, work goes on.
	err := c.Run(t.Context(), "t1", func(ctx context.Context, l *worker.Lease) error {
		n, _ := s.Streams()
		s.Restart(true)
		eventually(t, func() bool { ids, _ := s.Streams(); return len(ids) > len(n) }, "a reconnect")
		require.NoError(t, l.Checkpoint(ctx, "after", 1))
		require.NoError(t, ctx.Err())
		return nil
	}, worker.WithCreate())
	require.NoError(t, err)
	// Restarted without it: the first state shows none, which is a stop.
	err = c.Run(t.Context(), "t2", func(ctx context.Context, l *worker.Lease) error {
		s.Restart(false)
		<-ctx.Done()
		return nil
	}, worker.WithCreate())
	require.ErrorIs(t, err, worker.ErrLeaseLost)
}

func TestProblemsAreTypedFromTheTable(t *testing.T) {
	_, c := fake(t)
	err := c.Run(t.Context(), "nope", func(context.Context, *worker.Lease) error { return nil })
	require.ErrorIs(t, err, worker.ErrTaskNotFound)
	var e *worker.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, 404, e.Status)
	require.False(t, e.Retryable)
	require.NotErrorIs(t, err, worker.ErrLeaseLost)
	require.True(t, worker.ErrNoSession.Retryable)
	require.True(t, worker.ErrStaleEpoch.LeaseLost)
}

func TestRunCurrentTakesTheSidecarsLease(t *testing.T) {
	s, c := fake(t)
	epoch := s.Hold("job-7")
	t.Setenv(worker.EnvTask, "job-7")
	t.Setenv(worker.EnvCheckpoint, `{"step":2}`)
	t.Setenv(worker.EnvEpoch, fmt.Sprint(epoch+1))
	require.ErrorIs(t, c.RunCurrent(t.Context(), func(context.Context, *worker.Lease) error { return nil }), worker.ErrStaleEpoch)
	t.Setenv(worker.EnvEpoch, fmt.Sprint(epoch))
	err := c.RunCurrent(t.Context(), func(ctx context.Context, l *worker.Lease) error {
		require.Equal(t, epoch, l.Epoch())
		require.JSONEq(t, `{"step":2}`, string(l.ResumedFrom()))
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, "completed", s.Task("job-7").State)
	t.Setenv(worker.EnvTask, "other")
	require.ErrorIs(t, c.RunCurrent(t.Context(), func(context.Context, *worker.Lease) error { return nil }), worker.ErrNoTaskInEnv)
}

func TestCheckpointDataIsAnyJSON(t *testing.T) {
	s, c := fake(t)
	require.NoError(t, c.Run(t.Context(), "t1", func(ctx context.Context, l *worker.Lease) error {
		return l.Checkpoint(ctx, "s", json.RawMessage(`"page 3"`))
	}, worker.WithCreate()))
	require.Equal(t, `"page 3"`, s.Task("t1").Data)
}
