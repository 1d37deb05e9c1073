package raftstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/stretchr/testify/require"
)

func as(t *testing.T, owner string) context.Context {
	return WithCaller(ctxT(t), Caller{Owner: owner, Limited: true})
}

// TestBlockedReportIsOnEveryMembersHistory: a sidecar's report of writes
// it blocked lands on the task's history on every member, after the
// revocation that caused it, with its trace id; the lease is untouched.
func TestBlockedReportIsOnEveryMembersHistory(t *testing.T) {
	c := newTestCluster(t, 3)
	s := c.waitForLeader()
	sess, err := s.OpenSession(as(t, "sidecar/a"), "open-a", api.OpenSessionRequest{WorkerID: "wa"})
	require.NoError(t, err)
	g, err := s.Acquire(as(t, "sidecar/a"), "acq-a", "t1", api.AcquireRequest{SessionID: sess.SessionID, Create: true, Profile: "long"})
	require.NoError(t, err)
	_, err = s.Revoke(ctxT(t), "rev", "t1", api.RevokeRequest{Epoch: g.Lease.Epoch, Reason: "operator"})
	require.NoError(t, err)
	before, err := s.Task(ctxT(t), "t1", false)
	require.NoError(t, err)

	r := api.BlockedReport{SessionID: sess.SessionID, Epoch: g.Lease.Epoch, Reason: "revoked", Method: "POST",
		URL: "tools.internal:8080/v1/charge", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Count: 3}
	require.NoError(t, s.ReportBlocked(as(t, "sidecar/a"), "t1", r))

	for _, n := range c.snapshot() {
		waitFor(t, waitTimeout, "the report on "+n.NodeID(), func() bool {
			h, err := n.TaskHistory(ctxT(t), "t1")
			if errors.Is(err, lease.ErrTaskNotFound) {
				return false // a follower that has not applied the task yet
			}
			require.NoError(t, err)
			last := h.Events[len(h.Events)-1]
			if last.Kind != api.EventBlocked {
				return false
			}
			require.Equal(t, api.HistoryEvent{Seq: last.Seq, Index: last.Index, Time: last.Time, Kind: api.EventBlocked,
				TaskID: "t1", Epoch: g.Lease.Epoch, SessionID: sess.SessionID, Reason: "revoked", By: "sidecar/a",
				Method: "POST", URL: "tools.internal:8080/v1/charge", Count: 3, TraceID: r.TraceID}, last)
			require.Equal(t, lease.OpRevoke.String(), h.Events[len(h.Events)-2].Kind, "the block follows its cause")
			return true
		})
	}
	after, err := s.Task(ctxT(t), "t1", false)
	require.NoError(t, err)
	require.Equal(t, before, after, "a report changes no lease state")
}

// TestBlockedReportOnlyForOwnLeases: a sidecar reports on its own session
// and only for an epoch that session held; everyone else is refused and
// nothing is recorded.
func TestBlockedReportOnlyForOwnLeases(t *testing.T) {
	c := newTestCluster(t, 1)
	s := c.waitForLeader()
	a, err := s.OpenSession(as(t, "sidecar/a"), "open-a", api.OpenSessionRequest{WorkerID: "wa"})
	require.NoError(t, err)
	b, err := s.OpenSession(as(t, "sidecar/b"), "open-b", api.OpenSessionRequest{WorkerID: "wb"})
	require.NoError(t, err)
	g1, err := s.Acquire(as(t, "sidecar/a"), "acq-a", "t1", api.AcquireRequest{SessionID: a.SessionID, Create: true, Profile: "long"})
	require.NoError(t, err)
	_, err = s.Revoke(ctxT(t), "rev", "t1", api.RevokeRequest{Epoch: g1.Lease.Epoch})
	require.NoError(t, err)
	g2, err := s.Acquire(as(t, "sidecar/b"), "acq-b", "t1", api.AcquireRequest{SessionID: b.SessionID})
	require.NoError(t, err)
	require.Greater(t, g2.Lease.Epoch, g1.Lease.Epoch)

	rep := func(sid string, epoch uint64) api.BlockedReport {
		return api.BlockedReport{SessionID: sid, Epoch: epoch, Reason: "lost", Count: 1}
	}
	for _, tc := range []struct {
		name, who, task string
		r               api.BlockedReport
		want            error
	}{
		{"another's session", "sidecar/b", "t1", rep(a.SessionID, g1.Lease.Epoch), lease.ErrNotOwner},
		{"an epoch its session never held", "sidecar/b", "t1", rep(b.SessionID, g1.Lease.Epoch), lease.ErrNotHolder},
		{"an unknown session", "sidecar/a", "t1", rep("nope", g1.Lease.Epoch), lease.ErrSessionNotFound},
		{"an unknown task", "sidecar/a", "t9", rep(a.SessionID, g1.Lease.Epoch), lease.ErrTaskNotFound},
		{"no count", "sidecar/a", "t1", api.BlockedReport{SessionID: a.SessionID, Epoch: g1.Lease.Epoch, Reason: "lost"}, ErrInvalidArgument},
		{"a bad trace id", "sidecar/a", "t1", api.BlockedReport{SessionID: a.SessionID, Epoch: g1.Lease.Epoch, Reason: "lost", Count: 1,
			TraceID: "00000000000000000000000000000000"}, ErrInvalidArgument},
		{"a query-looking url", "sidecar/a", "t1", api.BlockedReport{SessionID: a.SessionID, Epoch: g1.Lease.Epoch, Reason: "lost", Count: 1,
			URL: "host/a b"}, ErrInvalidArgument},
	} {
		err := s.ReportBlocked(as(t, tc.who), tc.task, tc.r)
		require.ErrorIs(t, err, tc.want, tc.name)
	}
	h, err := s.TaskHistory(ctxT(t), "t1")
	require.NoError(t, err)
	for _, e := range h.Events {
		require.NotEqual(t, api.EventBlocked, e.Kind, "a refused report is not recorded: %+v", e)
	}
	// The old owner may still say its writes were blocked after the
	// takeover: that is when they matter most.
	require.NoError(t, s.ReportBlocked(as(t, "sidecar/a"), "t1", rep(a.SessionID, g1.Lease.Epoch)))
}

// TestBlockedEntrySkippedByAnEarlierRelease: a member that does not know
// the entry (an earlier release during a rolling upgrade) skips it, stays
// up and counts it applied; neither it nor one that applies it changes
// its replicated state.
func TestBlockedEntrySkippedByAnEarlierRelease(t *testing.T) {
	knows, old := newFSMHarness(t), newFSMHarness(t)
	knows.populate()
	old.populate()
	knowsHash, oldHash := knows.f.StateHash(), old.f.StateHash()
	e := blockedEntry{Time: time.Unix(100, 0).UTC(), TaskID: "t1", By: "sidecar/a",
		Report: api.BlockedReport{SessionID: "s1", Epoch: 2, Reason: "expired", Count: 1}}
	require.Nil(t, knows.entry(entryBlocked, e))
	h, ok := knows.f.history.task("t1")
	require.True(t, ok)
	require.Equal(t, api.EventBlocked, h.Events[len(h.Events)-1].Kind)

	saved := entryHandlers[entryBlocked]
	delete(entryHandlers, entryBlocked)
	t.Cleanup(func() { entryHandlers[entryBlocked] = saved })
	require.Nil(t, old.entry(entryBlocked, e), "an unknown ignorable entry is skipped")
	require.Nil(t, old.f.halt.halted(), "and does not halt the member")
	require.Equal(t, knowsHash, knows.f.StateHash(), "applying a report changes no replicated state")
	require.Equal(t, oldHash, old.f.StateHash(), "nor does skipping it")
	require.Equal(t, knows.f.applied.get(), old.f.applied.get(), "both count it as applied")
}
