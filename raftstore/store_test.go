package raftstore

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

func openSession(t *testing.T, s *Store, worker string) string {
	t.Helper()
	sess, err := s.OpenSession(ctxT(t), "open-"+worker, api.OpenSessionRequest{WorkerID: worker})
	require.NoError(t, err)
	return sess.SessionID
}

func TestSingleNodeLifecycle(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := newTestCluster(t, 1, func(cfg *Config) { cfg.Registerer = reg })
	s := c.waitForLeader()
	ctx := ctxT(t)
	require.NoError(t, s.Ready())
	require.Equal(t, "http-n0", s.LeaderHTTP())

	sid := openSession(t, s, "w1")
	again, err := s.OpenSession(ctx, "open-w1", api.OpenSessionRequest{WorkerID: "w1"})
	require.NoError(t, err)
	require.Equal(t, sid, again.SessionID, "a retried open names the same session")

	task, err := s.CreateTask(ctx, "c1", api.CreateTaskRequest{TaskID: "t1", Priority: 3, Payload: []byte("p")})
	require.NoError(t, err)
	require.Equal(t, "test", task.Profile)
	require.Equal(t, testTTL, task.TTL)

	g, err := s.Acquire(ctx, "a1", "t1", api.AcquireRequest{SessionID: sid})
	require.NoError(t, err)
	require.Equal(t, lease.StatusActive, g.Lease.Status)
	require.Equal(t, testTTL.Milliseconds(), g.ValidForMs)
	require.Equal(t, testHeartbeat.Milliseconds(), g.HeartbeatMs)

	// The signature verifies with the served public key.
	keys := s.Keys()
	require.Len(t, keys.Keys, 1)
	pub := ed25519.PublicKey(keys.Keys[0].PublicKey)
	require.Equal(t, fence.KeyID(pub), keys.Keys[0].ID)
	require.True(t, strings.HasPrefix(g.TokenSignature, "ed25519="+keys.Keys[0].ID+":"), g.TokenSignature)
	sig, err := base64.RawURLEncoding.DecodeString(g.TokenSignature[strings.LastIndexByte(g.TokenSignature, ':')+1:])
	require.NoError(t, err)
	require.True(t, ed25519.Verify(pub, fence.SigningMessage("t1", g.Lease.Epoch, "w1"), sig))

	// A retried acquire (same rid) returns the same epoch.
	g2, err := s.Acquire(ctx, "a1", "t1", api.AcquireRequest{SessionID: sid})
	require.NoError(t, err)
	require.Equal(t, g.Lease.Epoch, g2.Lease.Epoch)

	// Another session cannot take it.
	other := openSession(t, s, "w2")
	_, err = s.Acquire(ctx, "a2", "t1", api.AcquireRequest{SessionID: other})
	require.ErrorIs(t, err, lease.ErrLeaseHeld)
	require.Equal(t, 1.0, metricValue(t, s.m.acquireContended), "a refused acquire is counted as contention")

	tk, err := s.Checkpoint(ctx, "cp1", "t1", api.CheckpointRequest{SessionID: sid, Epoch: g.Lease.Epoch, Step: "one", Data: []byte("state")})
	require.NoError(t, err)
	require.Equal(t, uint64(1), tk.Checkpoint.Seq)
	_, err = s.Checkpoint(ctx, "cp2", "t1", api.CheckpointRequest{SessionID: sid, Epoch: g.Lease.Epoch - 1})
	require.ErrorIs(t, err, lease.ErrStaleEpoch)

	hb, err := s.Heartbeat(ctx, sid, api.HeartbeatRequest{Leases: []api.HeldLease{{TaskID: "t1", Epoch: g.Lease.Epoch}}})
	require.NoError(t, err)
	require.Equal(t, testTTL.Milliseconds(), hb.ValidForMs)
	require.Len(t, hb.Leases, 1)
	require.Equal(t, api.LeaseState{TaskID: "t1", Epoch: g.Lease.Epoch, Status: lease.StatusActive, ValidForMs: testTTL.Milliseconds()}, hb.Leases[0])

	read, err := s.Task(ctx, "t1", false)
	require.NoError(t, err)
	require.Equal(t, []byte("state"), read.Checkpoint.Data)
	ls, err := s.Leases(ctx, api.LeasePage{}, false)
	require.NoError(t, err)
	require.Len(t, ls.Leases, 1)
	list, err := s.Tasks(ctx, lease.TaskFilter{State: lease.TaskLeased}, true)
	require.NoError(t, err)
	require.Len(t, list.Tasks, 1)

	// Wait, signal, claim: a new, higher epoch.
	_, err = s.Wait(ctx, "w1", "t1", api.WaitRequest{SessionID: sid, Epoch: g.Lease.Epoch, Reason: "human"})
	require.NoError(t, err)
	hb, err = s.Heartbeat(ctx, sid, api.HeartbeatRequest{Leases: []api.HeldLease{{TaskID: "t1", Epoch: g.Lease.Epoch}}})
	require.NoError(t, err)
	require.Equal(t, api.SignalWaiting, hb.Leases[0].Signal)
	_, err = s.Signal(ctx, "sg1", "t1", api.SignalRequest{Payload: []byte("ok")})
	require.NoError(t, err)
	g3, err := s.Claim(ctx, "cl1", api.ClaimRequest{SessionID: other})
	require.NoError(t, err)
	require.Equal(t, "t1", g3.Task.ID)
	require.Greater(t, g3.Lease.Epoch, g.Lease.Epoch)

	// The old holder's heartbeat naming its old lease: lost, and an alarm.
	hb, err = s.Heartbeat(ctx, sid, api.HeartbeatRequest{Leases: []api.HeldLease{{TaskID: "t1", Epoch: g.Lease.Epoch}}})
	require.NoError(t, err)
	require.Equal(t, api.SignalWaiting, hb.Leases[0].Signal)

	// Journal: intent, outcome, replay.
	ir, err := s.Intent(ctx, "i1", "t1", api.IntentRequest{SessionID: other, Epoch: g3.Lease.Epoch, Key: "k1", Method: "POST", URL: "http://x/y", DeadlineMs: 1000})
	require.NoError(t, err)
	require.False(t, ir.Replay)
	eff, err := s.Outcome(ctx, "o1", "t1", "k1", api.OutcomeRequest{Epoch: g3.Lease.Epoch, Status: 201, Body: []byte("done")})
	require.NoError(t, err)
	require.Equal(t, lease.EffectDone, eff.State)
	ir, err = s.Intent(ctx, "i2", "t1", api.IntentRequest{SessionID: other, Epoch: g3.Lease.Epoch, Key: "k1", Method: "POST", URL: "http://x/y", DeadlineMs: 1000})
	require.NoError(t, err)
	require.True(t, ir.Replay)

	_, err = s.Release(ctx, "r1", "t1", api.ReleaseRequest{SessionID: other, Epoch: g3.Lease.Epoch, Outcome: lease.OutcomeCompleted})
	require.NoError(t, err)
	_, err = s.Release(ctx, "r2", "t1", api.ReleaseRequest{SessionID: other, Epoch: g3.Lease.Epoch, Outcome: lease.OutcomeCompleted})
	require.ErrorIs(t, err, lease.ErrLeaseNotActive, "double release")
	require.NoError(t, s.DeleteTask(ctx, "d1", "t1"))
	_, err = s.Task(ctx, "t1", false)
	require.ErrorIs(t, err, lease.ErrTaskNotFound)
	require.NoError(t, s.CloseSession(ctx, "cs1", sid))
	_, err = s.Heartbeat(ctx, sid, api.HeartbeatRequest{})
	require.ErrorIs(t, err, lease.ErrSessionNotFound)

	// Metrics are registered on the given registry.
	mfs, err := reg.Gather()
	require.NoError(t, err)
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, n := range []string{"fencepost_cluster_heartbeats_total", "fencepost_raft_leader", "fencepost_cluster_tasks",
		"fencepost_cluster_double_execution_alarms_total", "fencepost_cluster_acquire_contended_total", "fencepost_cluster_proposal_duration_seconds"} {
		require.True(t, names[n], "metric %s", n)
	}
}

func TestInputValidation(t *testing.T) {
	c := newTestCluster(t, 1, func(cfg *Config) { cfg.CheckpointMaxBytes = 16; cfg.MaxTaskIDBytes = 8 })
	s := c.waitForLeader()
	ctx := ctxT(t)
	sid := openSession(t, s, "w")
	for name, err := range map[string]error{
		"empty id":     func() error { _, err := s.CreateTask(ctx, "", api.CreateTaskRequest{}); return err }(),
		"long id":      func() error { _, err := s.CreateTask(ctx, "", api.CreateTaskRequest{TaskID: "123456789"}); return err }(),
		"bad utf8":     func() error { _, err := s.CreateTask(ctx, "", api.CreateTaskRequest{TaskID: "a\xff"}); return err }(),
		"control char": func() error { _, err := s.CreateTask(ctx, "", api.CreateTaskRequest{TaskID: "a\nb"}); return err }(),
		"bad outcome": func() error {
			_, err := s.Release(ctx, "", "t", api.ReleaseRequest{SessionID: sid, Epoch: 1, Outcome: "maybe"})
			return err
		}(),
		"no epoch": func() error { _, err := s.Checkpoint(ctx, "", "t", api.CheckpointRequest{SessionID: sid}); return err }(),
		"wait too long": func() error {
			_, err := s.Wait(ctx, "", "t", api.WaitRequest{SessionID: sid, Epoch: 1, TimeoutMs: 1 << 60})
			return err
		}(),
		"no worker": func() error { _, err := s.OpenSession(ctx, "", api.OpenSessionRequest{}); return err }(),
		"bad status": func() error {
			_, err := s.Outcome(ctx, "", "t", "k", api.OutcomeRequest{Epoch: 1, Status: 42})
			return err
		}(),
	} {
		require.ErrorIs(t, err, ErrInvalidArgument, name)
	}
	_, err := s.CreateTask(ctx, "", api.CreateTaskRequest{TaskID: "t", Profile: "nope"})
	require.ErrorIs(t, err, ErrUnknownProfile)
	_, err = s.Checkpoint(ctx, "", "t", api.CheckpointRequest{SessionID: sid, Epoch: 1, Data: make([]byte, 17)})
	require.ErrorIs(t, err, ErrTooLarge)
	_, err = s.Release(ctx, "", "nope", api.ReleaseRequest{SessionID: sid, Epoch: 1, Outcome: lease.OutcomeCompleted})
	require.ErrorIs(t, err, lease.ErrTaskNotFound)
}

func TestConfigValidate(t *testing.T) {
	base := Config{NodeID: "n", DataDir: "d", RaftAddr: "127.0.0.1:0"}
	require.NoError(t, base.Validate())
	for field, mod := range map[string]func(*Config){
		"NodeID":             func(c *Config) { c.NodeID = "" },
		"DataDir":            func(c *Config) { c.DataDir = "" },
		"LeaderLeaseTimeout": func(c *Config) { c.LeaderLeaseTimeout = time.Second },
		"1.5 × ElectionTimeout": func(c *Config) {
			c.ElectionTimeout = 20 * time.Second
			c.HeartbeatTimeout = time.Second
		},
		"TTL/3": func(c *Config) {
			c.Profiles = map[string]Profile{"short": {TTL: 21 * time.Second, Heartbeat: 8 * time.Second}}
		},
		"DefaultProfile": func(c *Config) { c.DefaultProfile = "nope" },
		"MaxTTL":         func(c *Config) { c.Profiles = map[string]Profile{"short": {TTL: time.Hour, Heartbeat: time.Second}} },
		"SigningKey":     func(c *Config) { c.SigningKey = []byte{1} },
	} {
		cfg := base
		mod(&cfg)
		err := cfg.Validate()
		require.ErrorIs(t, err, ErrConfig, field)
		require.Contains(t, err.Error(), field)
	}
}

func TestHeartbeatsShareVerifyRounds(t *testing.T) {
	c := newTestCluster(t, 3)
	const n = 64
	sids := make([]string, n)
	for i := range sids {
		sids[i] = c.openSession(fmt.Sprintf("w%d", i))
	}
	// The machine is shared: if leadership moves mid-batch, measure again.
	for attempt := 0; ; attempt++ {
		s := c.waitForLeader()
		before := s.verify.roundCount()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for _, sid := range sids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := s.Heartbeat(ctxT(t), sid, api.HeartbeatRequest{})
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		var failed error
		for err := range errs {
			if err != nil {
				failed = err
			}
		}
		if failed != nil && retryable(failed) && attempt < 5 {
			continue
		}
		require.NoError(t, failed)
		rounds := s.verify.roundCount() - before
		require.Less(t, rounds, uint64(n/2), "concurrent heartbeats must share VerifyLeader rounds (%d rounds for %d heartbeats)", rounds, n)
		t.Logf("%d heartbeats, %d VerifyLeader rounds", n, rounds)
		return
	}
}

func TestFollowerRefusesAndNamesLeader(t *testing.T) {
	c := newTestCluster(t, 3)
	leader := c.waitForLeader()
	ctx := ctxT(t)
	var follower *Store
	for _, s := range c.live() {
		if s != leader {
			follower = s
		}
	}
	waitFor(t, waitTimeout, "follower to learn the leader's HTTP address", func() bool {
		return follower.LeaderHTTP() == leader.cfg.HTTPAddr && follower.Ready() == nil
	})
	_, err := follower.CreateTask(ctx, "x", api.CreateTaskRequest{TaskID: "t"})
	require.ErrorIs(t, err, ErrNotLeader)
	_, err = follower.Task(ctx, "t", false)
	require.ErrorIs(t, err, ErrNotLeader)
	_, err = follower.Heartbeat(ctx, "s", api.HeartbeatRequest{})
	require.ErrorIs(t, err, ErrNotLeader)
	_, err = leader.CreateTask(ctx, "x", api.CreateTaskRequest{TaskID: "t"})
	require.NoError(t, err)
	waitFor(t, waitTimeout, "stale read on the follower", func() bool {
		_, err := follower.Task(ctx, "t", true)
		return err == nil
	})
	st := follower.Status()
	require.Len(t, st.Members, 3)
	require.Equal(t, leader.NodeID(), st.Leader)
	require.Equal(t, "Follower", st.State)
	require.Equal(t, leader.cfg.HTTPAddr, st.LeaderHTTP)
	require.True(t, errors.Is(follower.Join(ctx, api.JoinRequest{ID: "x", RaftAddr: "127.0.0.1:1"}), ErrNotLeader))
}

func TestModelErrorCarriesEpoch(t *testing.T) {
	c := newTestCluster(t, 1)
	s := c.waitForLeader()
	ctx := ctxT(t)
	sid := openSession(t, s, "w")
	g, err := s.Acquire(ctx, "a", "t", api.AcquireRequest{SessionID: sid, Create: true})
	require.NoError(t, err)
	_, err = s.Checkpoint(ctx, "c", "t", api.CheckpointRequest{SessionID: sid, Epoch: g.Lease.Epoch + 100})
	require.ErrorIs(t, err, lease.ErrStaleEpoch)
	var me interface{ CurrentEpoch() uint64 }
	require.ErrorAs(t, err, &me)
	require.Equal(t, g.Lease.Epoch, me.CurrentEpoch())
}

// A second node on a data directory another one holds fails to open (bolt's
// file lock) and says so, instead of waiting for the lock forever.
func TestSecondOpenOnHeldDataDirFails(t *testing.T) {
	cfg := testConfig(t, "n1")
	cfg.Bootstrap = true
	first, err := Open(cfg)
	require.NoError(t, err)
	defer first.Close()

	again := cfg
	again.RaftAddr = "127.0.0.1:0"
	done := make(chan error, 1)
	go func() {
		s, err := Open(again)
		if err == nil {
			_ = s.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		require.Error(t, err, "a held data directory must not open twice")
		require.Contains(t, err.Error(), "open log store")
	case <-time.After(boltOpenTimeout + 10*time.Second):
		t.Fatal("a second Open on a held data directory hangs")
	}
}
