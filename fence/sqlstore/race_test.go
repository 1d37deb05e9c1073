package sqlstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/fencepost/fencepost/fence"
	"github.com/stretchr/testify/require"
)

// historyOp is one write attempt seen by a client.
type historyOp struct {
	Client    int
	Task      string
	Epoch     uint64
	Call, Ret int64
	Accepted  bool
}

func (o historyOp) String() string {
	verdict := "stale"
	if o.Accepted {
		verdict = "accepted"
	}
	return fmt.Sprintf("[%d,%d] client %d %s epoch %d -> %s", o.Call, o.Ret, o.Client, o.Task, o.Epoch, verdict)
}

// fencedRegister is the porcupine model of one task: the state is the
// highest accepted epoch; a write is accepted iff its epoch is not lower.
var fencedRegister = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byTask := map[string][]porcupine.Operation{}
		var order []string
		for _, op := range h {
			task := op.Input.(historyOp).Task
			if _, ok := byTask[task]; !ok {
				order = append(order, task)
			}
			byTask[task] = append(byTask[task], op)
		}
		out := make([][]porcupine.Operation, 0, len(order))
		for _, task := range order {
			out = append(out, byTask[task])
		}
		return out
	},
	Init: func() any { return uint64(0) },
	Step: func(state, input, output any) (bool, any) {
		st, e := state.(uint64), input.(historyOp).Epoch
		if output.(bool) {
			return e >= st, e
		}
		return e < st, st
	},
}

// testI3RacingEpochs races clients writing with old and new epochs to a
// few tasks. The handler inserts into the app table inside the store's
// transaction, so the app table's sequence is the order writes took effect
// per task. Proves I3 on that order and checks every verdict against the
// fenced-register model; prints the seed and history on failure.
func testI3RacingEpochs(t *testing.T, x *testDB) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FENCE_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
	}
	const clients, ops, tasks = 12, 25, 3
	var clock atomic.Int64
	current := make([]atomic.Uint64, tasks)
	for i := range current {
		current[i].Store(3)
	}
	history := make([][]historyOp, clients)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			for range ops {
				ti := rng.IntN(tasks)
				epoch := current[ti].Load() - uint64(rng.IntN(3))
				if rng.IntN(4) == 0 {
					epoch = current[ti].Add(1)
				}
				op := historyOp{Client: c, Task: "task-" + strconv.Itoa(ti), Epoch: epoch}
				w := fence.Write{Key: fence.TaskKey{Task: op.Task}, Epoch: epoch}
				op.Call = clock.Add(1)
				_, _, err := x.store.Do(fence.WithWrite(context.Background(), w), w, x.appWrite("w", 200))
				op.Ret = clock.Add(1)
				var se *fence.StaleError
				if err != nil && !errors.As(err, &se) {
					t.Errorf("seed %d: client %d: %v", seed, c, err)
					return
				}
				op.Accepted = err == nil
				history[c] = append(history[c], op)
			}
		}()
	}
	wg.Wait()
	var all []porcupine.Operation
	var flat []historyOp
	accepted := 0
	for _, h := range history {
		for _, op := range h {
			flat = append(flat, op)
			all = append(all, porcupine.Operation{ClientId: op.Client, Input: op, Output: op.Accepted, Call: op.Call, Return: op.Ret})
			if op.Accepted {
				accepted++
			}
		}
	}
	slices.SortFunc(flat, func(a, b historyOp) int { return cmp.Compare(a.Call, b.Call) })
	dump := func() string {
		var b strings.Builder
		fmt.Fprintf(&b, "%s seed %d (rerun with FENCE_SEED=%d)\n", x.dialect, seed, seed)
		for _, op := range flat {
			b.WriteString(op.String() + "\n")
		}
		return b.String()
	}
	applied := x.appRows(t)
	require.Equal(t, accepted, len(applied), dump())
	require.NoError(t, fence.CheckEpochOrder(applied), dump())
	res := porcupine.CheckOperationsTimeout(fencedRegister, all, 20*time.Second)
	require.NotEqual(t, porcupine.Illegal, res, "history is not a fenced register:\n%s", dump())
	require.Greater(t, accepted, 0)
	require.Less(t, accepted, len(flat), "no stale writes: the race proved nothing")
}
