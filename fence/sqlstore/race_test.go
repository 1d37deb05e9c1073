package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"github.com/fencepost/fencepost/fence/fencetest"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/fencepost/fencepost/fence"
	"github.com/stretchr/testify/require"
)

// historyOp is one write attempt seen by a client.
type historyOp = fencetest.Write

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
	h := fencetest.Flatten(history)
	accepted, flat, all := h.Accepted, h.Writes, h.Ops
	dump := func() string {
		return h.Dump(fmt.Sprintf("%s seed %d (rerun with FENCE_SEED=%d)", x.dialect, seed, seed))
	}
	applied := x.appRows(t)
	require.Equal(t, accepted, len(applied), dump())
	require.NoError(t, fence.CheckEpochOrder(applied), dump())
	res := porcupine.CheckOperationsTimeout(fencetest.FencedRegister, all, 20*time.Second)
	require.NotEqual(t, porcupine.Illegal, res, "history is not a fenced register:\n%s", dump())
	require.Greater(t, accepted, 0)
	require.Less(t, accepted, len(flat), "no stale writes: the race proved nothing")
}
