package fault

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/test/netfault"
	"github.com/fencepost/fencepost/test/scenario"
)

// fencedRegister is the downstream's contract as a porcupine model: the
// state is the highest epoch accepted; a write is accepted exactly when
// its epoch is not below it (I3).
var fencedRegister = porcupine.Model{
	Init: func() any { return uint64(0) },
	Step: func(state, input, output any) (bool, any) {
		maxSeen, epoch, accepted := state.(uint64), input.(uint64), output.(bool)
		if accepted {
			return epoch >= maxSeen, max(maxSeen, epoch)
		}
		return epoch < maxSeen, maxSeen
	},
	DescribeOperation: func(input, output any) string {
		if output.(bool) {
			return fmt.Sprintf("write epoch %d → accepted", input)
		}
		return fmt.Sprintf("write epoch %d → stale", input)
	},
}

// TestDelayedOldEpochWritesAreRejected runs several owners of one task in
// turn (each owner's lease revoked by an operator before the next
// acquires). Every owner makes one write directly and one that the
// network holds; the held writes are delivered at the end in a random
// order. The downstream's decisions must be those of a fenced register
// (porcupine), its accepted log must never go back in epoch (I3), and
// every held write of an owner older than the newest is rejected.
func TestDelayedOldEpochWritesAreRejected(t *testing.T) {
	e := newEnv(t, scenario.ClusterConfig{TTL: 2 * time.Second, Grace: 500 * time.Millisecond}, 60*time.Second)
	c := e.client(true)
	seed := time.Now().UnixNano()
	e.logf("test", "seed %d", seed)
	const task, rounds = "delayed", 4
	_, w := e.sidecar("W", e.cluster.Endpoints())

	type late struct {
		link  *netfault.Link
		epoch uint64
		sent  time.Time
		done  chan scenario.WriteResult
	}
	var lates []late
	var ops []porcupine.Operation
	var epochs []uint64
	for i := 0; i < rounds; i++ {
		g := e.acquire(w, task, false)
		epoch := g.Lease.Epoch
		if len(epochs) > 0 {
			require.Greater(t, epoch, epochs[len(epochs)-1], "I2")
		}
		epochs = append(epochs, epoch)
		r := w.Write(e.ctx, e.down.WriteURL(task), task, fmt.Sprintf("r%d-direct", i), fmt.Appendf(nil, `{"round":%d}`, i))
		require.Equal(t, scenario.Accepted, r.Outcome, "round %d direct write: %+v", i, r)
		ops = append(ops, porcupine.Operation{ClientId: i, Input: epoch, Output: true, Call: r.Sent.UnixNano(), Return: r.Done.UnixNano()})

		l, err := netfault.Listen(e.down.Addr(), netfault.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		l.Hold()
		lt := late{link: l, epoch: epoch, sent: time.Now(), done: make(chan scenario.WriteResult, 1)}
		go func(i int) {
			lt.done <- w.Write(e.ctx, "http://"+l.Addr()+"/v1/tasks/"+task+"/writes", task, fmt.Sprintf("r%d-late", i), fmt.Appendf(nil, `{"round":%d,"late":true}`, i))
		}(i)
		waitHeld(t, l)
		lates = append(lates, lt)
		e.logf("W", "epoch=%d: direct write accepted, late write held on the wire", epoch)

		if i == rounds-1 {
			break
		}
		_, err = c.Revoke(e.ctx, task, api.RevokeRequest{Epoch: epoch, Reason: "next owner"})
		require.NoError(t, err)
		eventually(t, 5*time.Second, 20*time.Millisecond, "W's sidecar dropping the revoked lease", func() bool {
			v, err := w.Lease(e.ctx, task)
			return err == nil && !v.Current
		})
		e.logf("ops", "revoked epoch=%d", epoch)
	}

	rng := rand.New(rand.NewSource(seed))
	rng.Shuffle(len(lates), func(i, j int) { lates[i], lates[j] = lates[j], lates[i] })
	for _, lt := range lates {
		accBefore, staleBefore := len(e.down.Accepted(task)), e.down.RejectedStale()
		lt.link.Release()
		eventually(t, 5*time.Second, 2*time.Millisecond, "the late write decided", func() bool {
			return len(e.down.Accepted(task)) > accBefore || e.down.RejectedStale() > staleBefore
		})
		// Observed after the decision, so a valid return time for it.
		decided := time.Now()
		<-lt.done
		acc := e.down.Accepted(task)
		accepted := len(acc) > accBefore
		if accepted {
			require.Equal(t, lt.epoch, acc[len(acc)-1].Epoch)
		}
		ops = append(ops, porcupine.Operation{ClientId: rounds, Input: lt.epoch, Output: accepted, Call: lt.sent.UnixNano(), Return: decided.UnixNano()})
		e.logf("net", "delivered the late write of epoch=%d → accepted=%v", lt.epoch, accepted)
		if lt.epoch != epochs[len(epochs)-1] {
			require.False(t, accepted, "I3: a late write of an older owner (epoch %d < %d) was accepted", lt.epoch, epochs[len(epochs)-1])
		}
	}

	acc := e.down.Accepted(task)
	require.NoError(t, checkI3(task, acc))
	require.NoError(t, e.down.CheckLog())
	require.Equal(t, rounds-1, e.down.RejectedStale())
	res, info := porcupine.CheckOperationsVerbose(fencedRegister, ops, 10*time.Second)
	if res != porcupine.Ok {
		t.Logf("porcupine: %+v", info)
	}
	require.Equal(t, porcupine.Ok, res, "the downstream's decisions are not those of a fenced register (seed %d)", seed)
}
