package raftstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/fence/pki/pkitest"
	"github.com/stretchr/testify/require"
)

// sidecarMargin is the sidecar's safety margin: 1% clock-rate drift plus
// a floor (DESIGN.md 4).
func sidecarMargin(validFor time.Duration) time.Duration {
	return validFor/100 + 20*time.Millisecond
}

func TestLeaderKillLeasesSurviveAndAreExtended(t *testing.T) {
	c := newTestCluster(t, 3)
	sid := c.openSession("w1")
	g := c.acquire("a1", "t1", sid, "mid")
	_, err := retryLeader(c, func(s *Store) (*lease.Task, error) {
		return s.Checkpoint(ctxT(t), "cp1", "t1", api.CheckpointRequest{SessionID: sid, Epoch: g.Lease.Epoch, Step: "before-kill", Data: []byte("x")})
	})
	require.NoError(t, err)
	_, err = retryLeader(c, func(s *Store) (api.HeartbeatResponse, error) {
		return s.Heartbeat(ctxT(t), sid, api.HeartbeatRequest{})
	})
	require.NoError(t, err)

	old := c.waitForLeader()
	oldDeadline := old.lessor.deadline(*c.task("t1").Lease)
	killedAt := time.Now()
	c.stop(c.index(old))
	leader := c.waitForNewLeader(old)
	t.Logf("failover: new leader %s in office %s after the kill", leader.NodeID(), time.Since(killedAt))

	tk, err := leader.Task(ctxT(t), "t1", true)
	require.NoError(t, err)
	require.Equal(t, lease.StatusActive, tk.Lease.Status, "the lease survives the failover")
	require.Equal(t, g.Lease.Epoch, tk.Lease.Epoch)
	require.Equal(t, "before-kill", tk.Checkpoint.Step, "acknowledged checkpoints survive failover (I5)")

	newDeadline := leader.lessor.deadline(*tk.Lease)
	require.False(t, newDeadline.Before(oldDeadline), "a new leader extends, never shortens: old %s new %s", oldDeadline, newDeadline)
	require.False(t, newDeadline.Before(killedAt.Add(3*time.Second)), "extended to at least promotion + TTL")

	hb, err := retryLeader(c, func(s *Store) (api.HeartbeatResponse, error) {
		return s.Heartbeat(ctxT(t), sid, api.HeartbeatRequest{Leases: []api.HeldLease{{TaskID: "t1", Epoch: g.Lease.Epoch}}})
	})
	require.NoError(t, err)
	require.Equal(t, lease.StatusActive, hb.Leases[0].Status)
	require.Empty(t, hb.Leases[0].Signal)

	other := c.openSession("w2")
	_, err = retryLeader(c, func(s *Store) (api.Grant, error) {
		return s.Acquire(ctxT(t), "a2", "t1", api.AcquireRequest{SessionID: other})
	})
	require.ErrorIs(t, err, lease.ErrLeaseHeld, "nobody else gets the task after a failover")
	c.waitConverged()
	c.requireSameHash()
}

func TestPartitionedLeaderCannotRenew(t *testing.T) {
	c := newTestCluster(t, 3)
	sid := c.openSession("w1")
	g := c.acquire("a1", "t1", sid, "")

	// The sidecar's view: deadline = send time + validFor − margin, taken
	// from the last heartbeat the (soon deposed) leader acknowledged.
	old := c.waitForLeader()
	var sidecarDeadline time.Time
	waitFor(t, waitTimeout, "a heartbeat acknowledged by the leader", func() bool {
		sent := time.Now()
		hb, err := old.Heartbeat(ctxT(t), sid, api.HeartbeatRequest{})
		if err != nil {
			return false
		}
		v := time.Duration(hb.ValidForMs) * time.Millisecond
		sidecarDeadline = sent.Add(v - sidecarMargin(v))
		return true
	})
	oi := c.index(old)
	c.partition(oi, true)
	cutAt := time.Now()
	t.Cleanup(func() { c.partition(oi, false) })

	// The cut-off leader stops acknowledging renewals within bounded time.
	// hashicorp/raft's VerifyLeader also counts a heartbeat response that
	// was already in flight when the cut happened, so one acknowledgement
	// right after the cut is legitimate (that follower confirmed the
	// leadership at most one round trip earlier); the sidecar's deadline is
	// then taken from that last acknowledgement, exactly as a sidecar would.
	var acked int
	for {
		sent := time.Now()
		hb, err := old.Heartbeat(ctxT(t), sid, api.HeartbeatRequest{})
		if err != nil {
			require.True(t, retryable(err), "not-leader / timeout, got %v", err)
			break
		}
		acked++
		v := time.Duration(hb.ValidForMs) * time.Millisecond
		sidecarDeadline = sent.Add(v - sidecarMargin(v))
		// Only responses already in flight at the cut may confirm a round:
		// without the VerifyLeader round the old leader would go on
		// acknowledging until its leader lease ran out and it stepped down.
		require.Less(t, sent.Sub(cutAt), c.cfgs[oi].LeaderLeaseTimeout/2,
			"a partitioned leader acknowledged a heartbeat sent %s after the cut", sent.Sub(cutAt))
	}
	for range 3 {
		start := time.Now()
		_, err := old.Heartbeat(ctxT(t), sid, api.HeartbeatRequest{})
		require.Error(t, err, "a deposed leader must not acknowledge a renewal")
		require.True(t, retryable(err), "not-leader / timeout, got %v", err)
		require.Less(t, time.Since(start), 2*time.Second, "the failure comes in bounded time")
	}
	t.Logf("deposed leader acknowledged %d heartbeats after the cut, then refused; sidecar deadline %s after the cut",
		acked, sidecarDeadline.Sub(cutAt))

	// The majority elects a new leader, which never hears from the sidecar:
	// it must not expire the lease before the sidecar's deadline passed.
	leader := c.waitForNewLeader(old)
	var expiredSeen time.Time
	waitFor(t, waitTimeout, "the new leader to expire the silent lease", func() bool {
		tk, err := leader.Task(ctxT(t), "t1", true)
		require.NoError(t, err)
		switch tk.Lease.Status {
		case lease.StatusExpired, lease.StatusReclaimed:
			expiredSeen = time.Now()
			return true
		}
		require.True(t, time.Now().Before(sidecarDeadline) || tk.Lease.Status != lease.StatusExpired)
		return false
	})
	require.True(t, expiredSeen.After(sidecarDeadline),
		"the lease expired %s before the sidecar's deadline", sidecarDeadline.Sub(expiredSeen))
	t.Logf("expired %s after the sidecar's deadline", expiredSeen.Sub(sidecarDeadline))

	// The resume guard hands the task over with a higher epoch.
	other := c.openSession("w2")
	g2, err := retryLeader(c, func(s *Store) (api.Grant, error) {
		waitFor(t, waitTimeout, "reclaim", func() bool {
			tk, err := s.Task(ctxT(t), "t1", true)
			return err == nil && tk.Lease.Status == lease.StatusReclaimed
		})
		return s.Acquire(ctxT(t), "a2", "t1", api.AcquireRequest{SessionID: other})
	})
	require.NoError(t, err)
	require.Greater(t, g2.Lease.Epoch, g.Lease.Epoch)

	c.partition(oi, false)
	c.waitConverged()
	c.requireSameHash()
}

func TestRestartFromDataDir(t *testing.T) {
	c := newTestCluster(t, 3)
	sid := c.openSession("w1")
	var grants []api.Grant
	for i := range 5 {
		g := c.acquire(fmt.Sprintf("a%d", i), fmt.Sprintf("t%d", i), sid, "long")
		_, err := retryLeader(c, func(s *Store) (*lease.Task, error) {
			return s.Checkpoint(ctxT(t), fmt.Sprintf("cp%d", i), g.Task.ID, api.CheckpointRequest{SessionID: sid, Epoch: g.Lease.Epoch, Data: []byte{byte(i)}})
		})
		require.NoError(t, err)
		grants = append(grants, g)
	}
	c.waitConverged()
	hash := c.live()[0].StateHash()
	keys := c.live()[0].Keys()

	// One follower restarts alone, then the whole cluster.
	var fi int
	for i, s := range c.snapshot() {
		if !s.IsLeader() {
			fi = i
		}
	}
	c.stop(fi)
	c.start(fi)
	c.waitConverged()
	require.Equal(t, hash, c.node(fi).StateHash())

	for i := range c.cfgs {
		c.stop(i)
	}
	for i := range c.cfgs {
		c.start(i)
	}
	c.waitForLeader()
	c.waitConverged()
	waitFor(t, waitTimeout, "every restarted node to be ready", func() bool {
		for _, s := range c.live() {
			if s.Ready() != nil {
				return false
			}
		}
		return true
	})
	for _, g := range grants {
		tk := c.task(g.Task.ID)
		require.Equal(t, g.Lease.Epoch, tk.Lease.Epoch)
		require.NotNil(t, tk.Checkpoint, "checkpoint of %s lost across restart (I5)", g.Task.ID)
	}
	require.Equal(t, keys, c.node(0).Keys(), "the signing key survives a restart")
	c.requireSameHash()
}

// TestSnapshotRestoreKeepsCheckpoints runs in plaintext and with mutual
// TLS, where the snapshot's data passes the transport's RPC guard.
func TestSnapshotRestoreKeepsCheckpoints(t *testing.T) {
	t.Run("plaintext", func(t *testing.T) { testSnapshotRestoreKeepsCheckpoints(t) })
	t.Run("tls", func(t *testing.T) { testSnapshotRestoreKeepsCheckpoints(t, withTLS(pkitest.New(t, "cluster"))) })
}

func testSnapshotRestoreKeepsCheckpoints(t *testing.T, mods ...func(*Config)) {
	c := newTestCluster(t, 3, append(mods, func(cfg *Config) { cfg.TrailingLogs = 4 })...)
	sid := c.openSession("w1")
	write := func(from, to int) {
		for i := from; i < to; i++ {
			g := c.acquire(fmt.Sprintf("a%d", i), fmt.Sprintf("t%d", i), sid, "long")
			_, err := retryLeader(c, func(s *Store) (*lease.Task, error) {
				return s.Checkpoint(ctxT(t), fmt.Sprintf("cp%d", i), g.Task.ID, api.CheckpointRequest{SessionID: sid, Epoch: g.Lease.Epoch, Step: "s", Data: []byte(g.Task.ID)})
			})
			require.NoError(t, err)
		}
	}
	write(0, 10)
	c.waitConverged()

	// A follower goes down; the others snapshot and truncate their logs,
	// so the follower can only catch up through InstallSnapshot.
	var fi int
	for i, s := range c.snapshot() {
		if !s.IsLeader() {
			fi = i
		}
	}
	c.stop(fi)
	write(10, 20)
	for _, s := range c.live() {
		require.NoError(t, s.raft.Snapshot().Error())
	}
	write(20, 22)
	c.start(fi)
	c.waitConverged()
	c.requireSameHash()

	// Whole cluster restarts from snapshot + trailing log.
	for i := range c.cfgs {
		c.stop(i)
	}
	for i := range c.cfgs {
		c.start(i)
	}
	c.waitForLeader()
	c.waitConverged()
	c.requireSameHash()
	for i := range 22 {
		tk := c.task(fmt.Sprintf("t%d", i))
		require.NotNil(t, tk.Checkpoint, "checkpoint %d lost across snapshot + restore (I5)", i)
		require.Equal(t, []byte(tk.ID), tk.Checkpoint.Data)
	}
}

func TestJoinIsIdempotentAndRemoveWorks(t *testing.T) {
	c := newTestCluster(t, 3)
	members := func() []api.Member { return c.waitForLeader().Status().Members }
	require.Len(t, members(), 3)
	n2 := c.node(2)
	join := api.JoinRequest{ID: "n2", RaftAddr: n2.RaftAddr(), HTTPAddr: "http-n2"}
	_, err := retryLeader(c, func(s *Store) (struct{}, error) { return struct{}{}, s.Join(ctxT(t), join) })
	require.NoError(t, err)
	require.Len(t, members(), 3, "joining again is a no-op")

	join.HTTPAddr = "http-n2-moved"
	_, err = retryLeader(c, func(s *Store) (struct{}, error) { return struct{}{}, s.Join(ctxT(t), join) })
	require.NoError(t, err)
	waitFor(t, waitTimeout, "the new HTTP address", func() bool {
		for _, m := range members() {
			if m.ID == "n2" && m.HTTPAddr == "http-n2-moved" {
				return true
			}
		}
		return false
	})

	if n2.IsLeader() {
		c.stop(2)
		c.waitForNewLeader(n2)
	}
	_, err = retryLeader(c, func(s *Store) (struct{}, error) { return struct{}{}, s.Remove(ctxT(t), "n2") })
	require.NoError(t, err)
	waitFor(t, waitTimeout, "n2 to leave the configuration", func() bool { return len(members()) == 2 })
	c.stop(2)
	sid := c.openSession("w")
	c.acquire("a", "t", sid, "")
}
