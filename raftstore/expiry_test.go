package raftstore

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
)

func TestSilentLeaseIsRevivedThenReclaimed(t *testing.T) {
	// A longer grace, so the late heartbeat lands inside it even when the
	// shared test machine delays the expiry loop.
	c := newTestCluster(t, 1, func(cfg *Config) { cfg.Grace = 2 * time.Second })
	s := c.waitForLeader()
	ctx := ctxT(t)
	sid := openSession(t, s, "w1")
	g, err := s.Acquire(ctx, "a1", "t1", api.AcquireRequest{SessionID: sid, Create: true})
	require.NoError(t, err)
	_, err = s.Checkpoint(ctx, "cp", "t1", api.CheckpointRequest{SessionID: sid, Epoch: g.Lease.Epoch, Step: "half", Data: []byte("h")})
	require.NoError(t, err)

	status := func() lease.Status {
		tk, err := s.Task(ctx, "t1", false)
		require.NoError(t, err)
		return tk.Lease.Status
	}
	// No heartbeat: suspect_dead after the TTL.
	waitFor(t, waitTimeout, "suspect_dead", func() bool { return status() == lease.StatusSuspectDead })

	// A late heartbeat within the grace revives it with the same epoch.
	hb, err := s.Heartbeat(ctx, sid, api.HeartbeatRequest{Leases: []api.HeldLease{{TaskID: "t1", Epoch: g.Lease.Epoch}}})
	require.NoError(t, err)
	require.Len(t, hb.Leases, 1)
	require.Equal(t, api.SignalRevived, hb.Leases[0].Signal)
	require.Equal(t, lease.StatusActive, hb.Leases[0].Status)
	require.Equal(t, g.Lease.Epoch, hb.Leases[0].Epoch)
	require.Equal(t, lease.StatusActive, status())

	// Silent again: suspect, expired, then reclaimed by the resume guard.
	waitFor(t, waitTimeout, "reclaimed", func() bool { return status() == lease.StatusReclaimed })
	hb, err = s.Heartbeat(ctx, sid, api.HeartbeatRequest{Leases: []api.HeldLease{{TaskID: "t1", Epoch: g.Lease.Epoch}}})
	require.NoError(t, err)
	require.Equal(t, api.SignalLost, hb.Leases[0].Signal, "a reclaimed lease never comes back")

	other := openSession(t, s, "w2")
	g2, err := s.Claim(ctx, "cl", api.ClaimRequest{SessionID: other})
	require.NoError(t, err)
	require.Equal(t, "t1", g2.Task.ID)
	require.Greater(t, g2.Lease.Epoch, g.Lease.Epoch)
	require.Equal(t, "half", g2.Task.Checkpoint.Step, "the checkpoint is handed to the next owner")

	// The old holder's writes are fenced.
	_, err = s.Checkpoint(ctx, "cp-old", "t1", api.CheckpointRequest{SessionID: sid, Epoch: g.Lease.Epoch})
	require.ErrorIs(t, err, lease.ErrStaleEpoch)
	// Its heartbeat naming the old lease raises the double-execution alarm.
	before := metricValue(t, s.m.alarms.WithLabelValues("heartbeat_foreign_lease"))
	_, err = s.Heartbeat(ctx, sid, api.HeartbeatRequest{Leases: []api.HeldLease{{TaskID: "t1", Epoch: g.Lease.Epoch}}})
	require.NoError(t, err)
	require.Equal(t, before+1, metricValue(t, s.m.alarms.WithLabelValues("heartbeat_foreign_lease")))

	require.Equal(t, 1.0, metricValue(t, s.m.reclaimed))
	require.Equal(t, 1.0, metricValue(t, s.m.revived))
	require.Equal(t, 1.0, metricValue(t, s.m.resumed), "a grant after a reclaim counts as a resume")
	require.GreaterOrEqual(t, metricValue(t, s.m.suspected), 2.0)
}

func TestHeartbeatKeepsLeaseAlive(t *testing.T) {
	c := newTestCluster(t, 1)
	s := c.waitForLeader()
	ctx := ctxT(t)
	sid := openSession(t, s, "w1")
	g, err := s.Acquire(ctx, "a1", "t1", api.AcquireRequest{SessionID: sid, Create: true})
	require.NoError(t, err)
	end := time.Now().Add(2 * testTTL)
	for time.Now().Before(end) {
		hb, err := s.Heartbeat(ctx, sid, api.HeartbeatRequest{})
		require.NoError(t, err)
		require.Equal(t, lease.StatusActive, hb.Leases[0].Status, "a heartbeated lease stays active")
		require.Empty(t, hb.Leases[0].Signal)
		time.Sleep(testHeartbeat)
	}
	tk, err := s.Task(ctx, "t1", false)
	require.NoError(t, err)
	require.Equal(t, g.Lease.Epoch, tk.Lease.Epoch)
	require.True(t, tk.Lease.ExpiresAt.After(lease.StampOf(time.Now())), "reads overlay the leader's renewed deadline")
}

func TestWaitDeadlineMakesTaskClaimable(t *testing.T) {
	c := newTestCluster(t, 1, func(cfg *Config) { cfg.Registerer = prometheus.NewRegistry() })
	s := c.waitForLeader()
	ctx := ctxT(t)
	sid := openSession(t, s, "w1")
	g, err := s.Acquire(ctx, "a1", "t1", api.AcquireRequest{SessionID: sid, Create: true, Profile: "long"})
	require.NoError(t, err)
	_, err = s.Wait(ctx, "w", "t1", api.WaitRequest{SessionID: sid, Epoch: g.Lease.Epoch, TimeoutMs: 200})
	require.NoError(t, err)
	waitFor(t, waitTimeout, "the wait deadline signal", func() bool {
		tk, err := s.Task(ctx, "t1", false)
		require.NoError(t, err)
		return tk.State == lease.TaskPending
	})
	// The leader observes the paused time once its signal proposal returns.
	waitFor(t, waitTimeout, "the paused-time observation", func() bool { return histogramCount(t, s.m.pausedSeconds) == 1 })
}

// TestReplicasAgreeAfterRandomOperations drives random operations from
// several sessions through the leader; afterwards every replica holds the
// same state hash at the same applied index.
func TestReplicasAgreeAfterRandomOperations(t *testing.T) {
	c := newTestCluster(t, 3)
	rng := rand.New(rand.NewPCG(1, 2))
	sessions := []string{c.openSession("w0"), c.openSession("w1"), c.openSession("w2")}
	type held struct {
		sid   string
		epoch uint64
	}
	holders := map[string]held{}
	for i := range 150 {
		rid := fmt.Sprintf("op%d", i)
		task := fmt.Sprintf("t%d", rng.IntN(6))
		sid := sessions[rng.IntN(len(sessions))]
		h := holders[task]
		_, err := retryLeader(c, func(s *Store) (struct{}, error) {
			ctx := ctxT(t)
			var err error
			switch rng.IntN(6) {
			case 0, 1:
				var g api.Grant
				g, err = s.Acquire(ctx, rid, task, api.AcquireRequest{SessionID: sid, Create: true, Profile: "long"})
				if err == nil {
					holders[task] = held{sid, g.Lease.Epoch}
				}
			case 2:
				_, err = s.Checkpoint(ctx, rid, task, api.CheckpointRequest{SessionID: h.sid, Epoch: max(h.epoch, 1), Data: []byte(rid)})
			case 3:
				_, err = s.Release(ctx, rid, task, api.ReleaseRequest{SessionID: h.sid, Epoch: max(h.epoch, 1), Outcome: lease.OutcomeGivenBack})
			case 4:
				_, err = s.Claim(ctx, rid, api.ClaimRequest{SessionID: sid})
			case 5:
				_, err = s.Revoke(ctx, rid, task, api.RevokeRequest{Reason: "random"})
			}
			return struct{}{}, err
		})
		if err != nil && retryable(err) {
			t.Fatalf("operation %d did not complete: %v", i, err)
		}
	}
	c.waitConverged()
	c.requireSameHash()
	idx := c.live()[0].AppliedIndex()
	for _, s := range c.live() {
		require.Equal(t, idx, s.AppliedIndex())
	}
}

func collectOne(t *testing.T, c prometheus.Collector) *dto.Metric {
	t.Helper()
	ch := make(chan prometheus.Metric, 1)
	c.Collect(ch)
	close(ch)
	var out dto.Metric
	require.NoError(t, (<-ch).Write(&out))
	return &out
}

// metricValue reads a counter's current value.
func metricValue(t *testing.T, c prometheus.Collector) float64 {
	return collectOne(t, c).GetCounter().GetValue()
}

// histogramCount reads how many observations a histogram holds.
func histogramCount(t *testing.T, h prometheus.Collector) uint64 {
	return collectOne(t, h).GetHistogram().GetSampleCount()
}

func TestHeartbeatCarriesRevokeAndCancel(t *testing.T) {
	c := newTestCluster(t, 1)
	s := c.waitForLeader()
	ctx := ctxT(t)
	sid := openSession(t, s, "w1")
	g1, err := s.Acquire(ctx, "a1", "t1", api.AcquireRequest{SessionID: sid, Create: true, Profile: "long"})
	require.NoError(t, err)
	g2, err := s.Acquire(ctx, "a2", "t2", api.AcquireRequest{SessionID: sid, Create: true, Profile: "long"})
	require.NoError(t, err)
	_, err = s.Revoke(ctx, "rv", "t1", api.RevokeRequest{Epoch: g1.Lease.Epoch, Reason: "operator"})
	require.NoError(t, err)
	_, err = s.Cancel(ctx, "cn", "t2", api.CancelRequest{Reason: "not needed"})
	require.NoError(t, err)
	hb, err := s.Heartbeat(ctx, sid, api.HeartbeatRequest{Leases: []api.HeldLease{{TaskID: "t1", Epoch: g1.Lease.Epoch}, {TaskID: "t2", Epoch: g2.Lease.Epoch}}})
	require.NoError(t, err)
	require.Len(t, hb.Leases, 2)
	for _, st := range hb.Leases {
		require.Equal(t, api.SignalRevoked, st.Signal, st.TaskID)
		require.Equal(t, lease.StatusRevoked, st.Status)
		require.Zero(t, st.ValidForMs)
	}
	require.Equal(t, "operator", hb.Leases[0].Reason)
}
