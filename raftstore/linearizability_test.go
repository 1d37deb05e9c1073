package raftstore

import (
	"errors"
	"fmt"
	"github.com/fencepost/fencepost/fence/fencetest"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/stretchr/testify/require"
)

// Porcupine model of the lease API, per task: at most one active holder at
// a time (I1), and every grant's epoch greater than the previous one (I2).

type lzOp uint8

const (
	lzAcquire lzOp = iota
	lzCheckpoint
	lzRelease
)

type lzInput struct {
	Op      lzOp
	Task    string
	Session string
	Epoch   uint64 // checkpoint / release: the epoch the client holds
}

type lzOutput struct {
	OK    bool
	Epoch uint64 // acquire: the granted epoch
	Code  string // model error code when !OK
}

type lzState struct {
	Holder string
	Epoch  uint64 // epoch of the latest grant
	Active bool
}

func (s lzState) holds(session string, epoch uint64) bool {
	return s.Active && s.Holder == session && s.Epoch == epoch
}

var leaseModel = porcupine.Model{
	Partition: fencetest.PartitionBy(func(input any) string { return input.(lzInput).Task }),
	Init:      func() any { return lzState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(lzState), input.(lzInput), output.(lzOutput)
		switch in.Op {
		case lzAcquire:
			switch {
			case out.OK && s.Active && s.Holder == in.Session:
				return out.Epoch == s.Epoch, s // the holder's retry: same lease
			case out.OK && !s.Active:
				return out.Epoch > s.Epoch, lzState{Holder: in.Session, Epoch: out.Epoch, Active: true}
			case out.OK:
				return false, s // a second active holder: I1 broken
			case out.Code == lease.ErrorCode(lease.ErrLeaseHeld):
				return s.Active && s.Holder != in.Session, s
			}
			return false, s
		case lzCheckpoint:
			return out.OK == s.holds(in.Session, in.Epoch), s
		case lzRelease:
			if out.OK {
				if !s.holds(in.Session, in.Epoch) {
					return false, s
				}
				s.Active = false
				return true, s
			}
			return !s.holds(in.Session, in.Epoch), s
		}
		return false, s
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(lzInput), output.(lzOutput)
		name := [...]string{"acquire", "checkpoint", "release"}[in.Op]
		res := "ok"
		if !out.OK {
			res = out.Code
		} else if in.Op == lzAcquire {
			res = fmt.Sprintf("epoch %d", out.Epoch)
		}
		return fmt.Sprintf("%s(%s, %s, e%d) → %s", name, in.Task, in.Session, in.Epoch, res)
	},
	DescribeState: func(state any) string {
		s := state.(lzState)
		if !s.Active {
			return fmt.Sprintf("free (last epoch %d)", s.Epoch)
		}
		return fmt.Sprintf("held by %s at epoch %d", s.Holder, s.Epoch)
	},
}

// TestLinearizableLeasesAcrossLeaderKill runs concurrent clients doing
// acquire / checkpoint / release against a 3-node cluster while the leader
// is killed, retrying each operation with the same request id until it has
// a definite answer, and checks the history with porcupine.
func TestLinearizableLeasesAcrossLeaderKill(t *testing.T) {
	c := newTestCluster(t, 3)
	tasks := []string{"p0", "p1"}
	for _, task := range tasks {
		_, err := retryLeader(c, func(s *Store) (*lease.Task, error) {
			return s.CreateTask(ctxT(t), "create-"+task, api.CreateTaskRequest{TaskID: task, Profile: "long"})
		})
		require.NoError(t, err)
	}
	const clients = 4
	sessions := make([]string, clients)
	for i := range sessions {
		sessions[i] = c.openSession(fmt.Sprintf("lz%d", i))
	}

	var (
		mu      sync.Mutex
		history []porcupine.Operation
		ridSeq  atomic.Uint64
		stop    atomic.Bool
		start   = time.Now()
	)
	// do runs one operation to a definite answer; false means it never
	// got one (the test then fails: the cluster must recover).
	do := func(client int, in lzInput) (lzOutput, bool) {
		rid := fmt.Sprintf("lz-%d", ridSeq.Add(1))
		call := time.Since(start).Nanoseconds()
		var out lzOutput
		_, err := retryLeader(c, func(s *Store) (struct{}, error) {
			ctx := ctxT(t)
			var err error
			switch in.Op {
			case lzAcquire:
				var g api.Grant
				g, err = s.Acquire(ctx, rid, in.Task, api.AcquireRequest{SessionID: in.Session})
				out.Epoch = g.Lease.Epoch
			case lzCheckpoint:
				_, err = s.Checkpoint(ctx, rid, in.Task, api.CheckpointRequest{SessionID: in.Session, Epoch: in.Epoch, Data: []byte(rid)})
			case lzRelease:
				_, err = s.Release(ctx, rid, in.Task, api.ReleaseRequest{SessionID: in.Session, Epoch: in.Epoch, Outcome: lease.OutcomeGivenBack})
			}
			return struct{}{}, err
		})
		if retryable(err) {
			t.Errorf("client %d: %v never completed: %v", client, in, err)
			return out, false
		}
		out.OK = err == nil
		if err != nil {
			out.Code = lease.ErrorCode(err)
			var modelErr bool
			for _, e := range []error{lease.ErrLeaseHeld, lease.ErrStaleEpoch, lease.ErrNotHolder, lease.ErrLeaseNotActive} {
				modelErr = modelErr || errors.Is(err, e)
			}
			if !modelErr {
				t.Errorf("client %d: %v: unexpected error %v", client, in, err)
				return out, false
			}
		}
		mu.Lock()
		history = append(history, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: time.Since(start).Nanoseconds()})
		mu.Unlock()
		return out, true
	}

	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			held := map[string]uint64{}
			for !stop.Load() {
				task := tasks[rng.IntN(len(tasks))]
				in := lzInput{Task: task, Session: sessions[i], Epoch: held[task]}
				switch r := rng.IntN(10); {
				case r < 4 || held[task] == 0:
					in.Op = lzAcquire
				case r < 7:
					in.Op = lzCheckpoint
				default:
					in.Op = lzRelease
				}
				out, ok := do(i, in)
				if !ok {
					return
				}
				if in.Op == lzAcquire && out.OK {
					held[task] = out.Epoch
				}
				if in.Op == lzRelease && out.OK {
					// Keep the old epoch: later calls with it must be refused.
					continue
				}
			}
		}()
	}

	historyLen := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(history)
	}
	waitFor(t, waitTimeout, "a history before the kill", func() bool { return historyLen() >= 100 })
	old := c.waitForLeader()
	c.stop(c.index(old))
	c.waitForNewLeader(old)
	killed := historyLen()
	waitFor(t, waitTimeout, "a history after the kill", func() bool { return historyLen() >= killed+100 })
	stop.Store(true)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	require.Greater(t, len(history), 50, "too little history to mean anything")
	res, info := porcupine.CheckOperationsVerbose(leaseModel, history, 30*time.Second)
	if res != porcupine.Ok {
		f, err := os.CreateTemp("", "raftstore-porcupine-*.html")
		require.NoError(t, err)
		require.NoError(t, porcupine.Visualize(leaseModel, info, f))
		require.NoError(t, f.Close())
		for _, op := range history {
			t.Log(leaseModel.DescribeOperation(op.Input, op.Output), op.Call, op.Return)
		}
		t.Fatalf("lease history is not linearizable (%s): see %s", res, f.Name())
	}
	t.Logf("%d operations linearizable across a leader kill", len(history))
}

// TestLeaseModelCatchesViolations makes sure the porcupine model would
// notice a second active holder (I1) and a non-increasing epoch (I2).
func TestLeaseModelCatchesViolations(t *testing.T) {
	op := func(call, ret int64, in lzInput, out lzOutput) porcupine.Operation {
		return porcupine.Operation{Input: in, Output: out, Call: call, Return: ret}
	}
	good := []porcupine.Operation{
		op(0, 1, lzInput{Op: lzAcquire, Task: "t", Session: "a"}, lzOutput{OK: true, Epoch: 5}),
		op(2, 3, lzInput{Op: lzAcquire, Task: "t", Session: "b"}, lzOutput{Code: "lease_held"}),
		op(4, 5, lzInput{Op: lzRelease, Task: "t", Session: "a", Epoch: 5}, lzOutput{OK: true}),
		op(6, 7, lzInput{Op: lzAcquire, Task: "t", Session: "b"}, lzOutput{OK: true, Epoch: 9}),
		op(8, 9, lzInput{Op: lzCheckpoint, Task: "t", Session: "a", Epoch: 5}, lzOutput{Code: "stale_epoch"}),
	}
	require.Equal(t, porcupine.Ok, porcupine.CheckOperationsTimeout(leaseModel, good, time.Second))

	twoHolders := append(good[:1:1], op(2, 3, lzInput{Op: lzAcquire, Task: "t", Session: "b"}, lzOutput{OK: true, Epoch: 7}))
	require.Equal(t, porcupine.Illegal, porcupine.CheckOperationsTimeout(leaseModel, twoHolders, time.Second))

	epochBack := append(good[:3:3], op(6, 7, lzInput{Op: lzAcquire, Task: "t", Session: "b"}, lzOutput{OK: true, Epoch: 5}))
	require.Equal(t, porcupine.Illegal, porcupine.CheckOperationsTimeout(leaseModel, epochBack, time.Second))

	staleWrite := append(good[:4:4], op(8, 9, lzInput{Op: lzCheckpoint, Task: "t", Session: "a", Epoch: 5}, lzOutput{OK: true}))
	require.Equal(t, porcupine.Illegal, porcupine.CheckOperationsTimeout(leaseModel, staleWrite, time.Second))
}
