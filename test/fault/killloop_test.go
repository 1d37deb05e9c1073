package fault

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/cluster"
	"github.com/fencepost/fencepost/test/netfault"
	"github.com/fencepost/fencepost/test/scenario"
)

// TestMembersSIGKILLedUnderWritesRestart SIGKILLs a member of a
// three-process cluster again and again while workers checkpoint as fast
// as they can, alternating the leader and a follower. A leader killed
// with entries it had not replicated comes back as a follower whose log
// tail the new leader overwrites, which is the truncation that left
// raft-wal v0.4.0 unable to reopen its segment; a kill can land inside
// any append, rotation or truncation. Every restart must come up ready on
// its own data directory, and at the end every acknowledged checkpoint is
// there (I5), on every member.
func TestMembersSIGKILLedUnderWritesRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the fencepost binary; skipped with -short")
	}
	const ttl, grace, rounds, writers = 3 * time.Second, time.Second, 8, 8
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	tl := scenario.NewTimeline(nil)
	t.Cleanup(func() {
		if t.Failed() || testing.Verbose() {
			t.Logf("timeline:\n%s", tl.String())
		}
	})
	netfault.Binary(t)
	pc := startProcCluster(t, tl, ttl, grace)
	c := scenario.NewClusterClient(pc.endpoints(), time.Second)
	defer c.Close()
	e := &env{t: t, ctx: ctx, tl: tl}
	sess, err := c.OpenSession(ctx, api.OpenSessionRequest{WorkerID: "writer"})
	require.NoError(t, err)
	hb := e.heartbeat(c, sess.SessionID, ttl/4, nil)
	defer hb.halt()

	var acks atomic.Int64
	acked := make([]uint64, writers)
	epochs := make([]uint64, writers)
	for i := range writers {
		g, err := c.Acquire(ctx, fmt.Sprintf("killloop-%d", i), api.AcquireRequest{SessionID: sess.SessionID, Create: true})
		require.NoError(t, err)
		epochs[i] = g.Lease.Epoch
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			checkpointLoop(ctx, c, stop, sess.SessionID, fmt.Sprintf("killloop-%d", i), epochs[i], &acked[i], &acks)
		}()
	}

	for round := range rounds {
		// Kill only once writes are flowing again since the last restart,
		// so every kill lands in the middle of appends.
		before := acks.Load()
		eventually(t, 20*time.Second, 10*time.Millisecond, "writes acknowledged", func() bool { return acks.Load() >= before+20 })
		var victim *procNode
		eventually(t, 10*time.Second, 20*time.Millisecond, "a leader", func() bool { victim = pc.leader(); return victim != nil })
		if round%2 == 1 {
			for _, n := range pc.nodes {
				if n != victim {
					victim = n
					break
				}
			}
		}
		require.NoError(t, victim.p.Kill())
		tl.Logf(victim.id, "round %d: SIGKILLed (%d checkpoints acknowledged so far)", round, acks.Load())
		pc.start(victim)
		pc.waitReady(victim, 30*time.Second)
		tl.Logf(victim.id, "round %d: restarted on its data directory and ready", round)
	}
	close(stop)
	wg.Wait()
	require.Greater(t, acks.Load(), int64(rounds*20))

	for _, n := range pc.nodes {
		nc := scenario.NewClusterClient([]string{n.http}, time.Second)
		for i := range writers {
			task := fmt.Sprintf("killloop-%d", i)
			var tk *lease.Task
			eventually(t, 10*time.Second, 50*time.Millisecond, n.id+" caught up on "+task, func() bool {
				v, err := nc.Task(ctx, task, true)
				if err != nil || v.Checkpoint == nil || v.Checkpoint.Seq < acked[i] {
					return false
				}
				tk = v
				return true
			})
			require.Equal(t, checkpointData(task, tk.Checkpoint.Seq), tk.Checkpoint.Data, "I5 on %s", n.id)
		}
		nc.Close()
	}
	require.Empty(t, hb.lostLeases(), "no lease lost while members were killed one at a time")
}

// checkpointLoop checkpoints task until stop, counting acknowledged ones
// in acks and keeping the last acknowledged seq in acked.
func checkpointLoop(ctx context.Context, c *cluster.Client, stop <-chan struct{}, sid, task string, epoch uint64, acked *uint64, acks *atomic.Int64) {
	for n := 0; n < 100000; n++ {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		seq := *acked + 1
		_, err := c.Checkpoint(ctx, task, api.CheckpointRequest{SessionID: sid, Epoch: epoch, Seq: seq,
			Step: fmt.Sprintf("step-%d", seq), Data: checkpointData(task, seq)})
		switch {
		case err == nil:
			*acked = seq
			acks.Add(1)
		case errors.Is(err, lease.ErrCheckpointSeq):
			// An attempt committed without an answer reaching us: not
			// acknowledged; continue after what the cluster holds.
			if tk, rerr := c.Task(ctx, task, false); rerr == nil && tk.Checkpoint != nil {
				*acked = tk.Checkpoint.Seq
			}
		}
	}
}

func checkpointData(task string, seq uint64) []byte {
	return fmt.Appendf(nil, "%s-state-%d", task, seq)
}
