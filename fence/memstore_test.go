package fence

import (
	"context"
	"errors"
	"fmt"
	"github.com/fencepost/fencepost/fence/fencetest"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func okFn(context.Context) (*Response, error) { return &Response{Status: http.StatusOK}, nil }

func doW(t *testing.T, s Store, task string, epoch uint64, key string) (Outcome, error) {
	t.Helper()
	w := Write{Key: TaskKey{Task: task}, Epoch: epoch, IdempotencyKey: key, Fingerprint: PayloadFingerprint("POST", "/", []byte(key))}
	_, o, err := s.Do(context.Background(), w, okFn)
	return o, err
}

func TestMemStoreMaxTasksNeverForgetsMaxSeen(t *testing.T) {
	s, err := NewMemStore(MemStoreConfig{MaxTasks: 2})
	require.NoError(t, err)
	_, err = doW(t, s, "a", 10, "")
	require.NoError(t, err)
	_, err = doW(t, s, "b", 10, "")
	require.NoError(t, err)
	_, err = doW(t, s, "c", 1, "")
	require.ErrorIs(t, err, ErrStoreFull)
	require.Equal(t, ProblemStoreFull, ProblemFor(err).Type)
	require.Equal(t, 503, ProblemFor(err).Status)
	// Known tasks keep working and keep their floor.
	_, err = doW(t, s, "a", 9, "")
	require.ErrorIs(t, err, ErrStale)
	_, err = doW(t, s, "b", 11, "")
	require.NoError(t, err)
	tasks, _ := s.Len()
	require.Equal(t, 2, tasks)
}

func TestMemStoreIdempotencyLRU(t *testing.T) {
	s, err := NewMemStore(MemStoreConfig{MaxIdempotencyRecords: 2})
	require.NoError(t, err)
	for _, k := range []string{"k1", "k2"} {
		o, err := doW(t, s, "t", 1, k)
		require.NoError(t, err)
		require.Equal(t, Executed, o)
	}
	o, _ := doW(t, s, "t", 1, "k1") // k1 becomes most recently used
	require.Equal(t, Replayed, o)
	o, _ = doW(t, s, "t", 1, "k3") // evicts k2
	require.Equal(t, Executed, o)
	_, records := s.Len()
	require.Equal(t, 2, records)
	o, _ = doW(t, s, "t", 1, "k1")
	require.Equal(t, Replayed, o)
	o, _ = doW(t, s, "t", 1, "k2")
	require.Equal(t, Executed, o, "an evicted key runs again")
}

func TestMemStoreIdempotencyTTL(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	s, err := NewMemStore(MemStoreConfig{IdempotencyTTL: time.Hour, Now: clock.Now})
	require.NoError(t, err)
	o, _ := doW(t, s, "t", 1, "k1")
	require.Equal(t, Executed, o)
	clock.Advance(59 * time.Minute)
	o, _ = doW(t, s, "t", 1, "k1")
	require.Equal(t, Replayed, o, "within the TTL of its last use")
	clock.Advance(59 * time.Minute)
	o, _ = doW(t, s, "t", 1, "k1")
	require.Equal(t, Replayed, o, "the replay refreshed it")
	clock.Advance(61 * time.Minute)
	o, _ = doW(t, s, "t", 1, "k2")
	require.Equal(t, Executed, o)
	_, records := s.Len()
	require.Equal(t, 1, records, "k1 expired")
	seen, _ := s.MaxSeen(TaskKey{Task: "t"})
	require.EqualValues(t, 1, seen, "expiry never touches max_seen")
}

func TestMemStoreRunningRecordsAreNotEvicted(t *testing.T) {
	s, err := NewMemStore(MemStoreConfig{MaxIdempotencyRecords: 1})
	require.NoError(t, err)
	entered, release, done := make(chan struct{}), make(chan struct{}), make(chan error)
	go func() {
		w := Write{Key: TaskKey{Task: "t1"}, Epoch: 1, IdempotencyKey: "k1"}
		_, _, err := s.Do(context.Background(), w, func(context.Context) (*Response, error) {
			close(entered)
			<-release
			return &Response{Status: 200}, nil
		})
		done <- err
	}()
	<-entered
	_, err = doW(t, s, "t2", 1, "k2")
	require.ErrorIs(t, err, ErrStoreFull)
	close(release)
	require.NoError(t, <-done)
	o, err := doW(t, s, "t2", 1, "k2")
	require.NoError(t, err)
	require.Equal(t, Executed, o, "the completed k1 is evictable now")
}

// historyOp is one write attempt seen by a client.
type historyOp = fencetest.Write

// testSeed returns FENCE_SEED or a fresh seed; failures print it.
func testSeed(t *testing.T) uint64 {
	if s := os.Getenv("FENCE_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		return n
	}
	return uint64(time.Now().UnixNano())
}

// raceStore runs clients goroutines, each making ops writes with racing
// epochs against tasks tasks of s, and proves I3: the order in which
// writes took effect never lowers a task's epoch, and every verdict fits
// the fenced-register model (so the stale write is always the one
// rejected). The write itself appends to a shared log, standing in for
// the service's state.
func raceStore(t *testing.T, s Store, clients, ops, tasks int) {
	seed := testSeed(t)
	var clock atomic.Int64
	var logMu sync.Mutex
	var applied []AppliedWrite
	// current[i] is the newest epoch granted for task i; clients act as
	// owners that were granted some epoch near it, some already replaced.
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
				cur := current[ti].Load()
				epoch := cur - uint64(rng.IntN(3))
				if rng.IntN(4) == 0 {
					epoch = current[ti].Add(1)
				}
				op := historyOp{Client: c, Task: "task-" + strconv.Itoa(ti), Epoch: epoch}
				w := Write{Key: TaskKey{Task: op.Task}, Epoch: epoch}
				op.Call = clock.Add(1)
				_, _, err := s.Do(context.Background(), w, func(ctx context.Context) (*Response, error) {
					logMu.Lock()
					applied = append(applied, AppliedWrite{Key: w.Key, Epoch: w.Epoch})
					logMu.Unlock()
					return &Response{Status: 200}, nil
				})
				op.Ret = clock.Add(1)
				if err != nil && !isStale(err) {
					t.Errorf("seed %d: unexpected error %v", seed, err)
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
	dump := func() string { return h.Dump(fmt.Sprintf("seed %d (rerun with FENCE_SEED=%d)", seed, seed)) }
	require.Equal(t, accepted, len(applied), dump())
	require.NoError(t, CheckEpochOrder(applied), dump())
	res := porcupine.CheckOperationsTimeout(fencetest.FencedRegister, all, 20*time.Second)
	require.NotEqual(t, porcupine.Illegal, res, "history is not a fenced register:\n%s", dump())
	require.Greater(t, accepted, 0)
	require.Less(t, accepted, len(flat), "the race produced no stale writes; the test proves nothing")
}

func isStale(err error) bool {
	var se *StaleError
	return errors.As(err, &se)
}

func TestMemStoreI3UnderRacingEpochs(t *testing.T) {
	s, err := NewMemStore(MemStoreConfig{})
	require.NoError(t, err)
	raceStore(t, s, 16, 60, 4)
}

// waiters reports how many writes wait for task k (test helper).
func (s *MemStore) waitersFor(k TaskKey) int {
	sh := s.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if t := sh.tasks[k]; t != nil {
		return t.waiters
	}
	return 0
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // poll interval, bounded by the deadline
	}
}

// TestMemStoreWakeUpIsPassedOn: a waiter that wakes up only to find its
// epoch stale must hand the wake-up to the next waiter, or that one would
// wait forever although the task is free.
func TestMemStoreWakeUpIsPassedOn(t *testing.T) {
	for i := range 20 {
		s, err := NewMemStore(MemStoreConfig{})
		require.NoError(t, err)
		k := TaskKey{Task: "t"}
		// A done key the replay below will hit.
		_, _, err = s.Do(context.Background(), Write{Key: k, Epoch: 1, IdempotencyKey: "done"}, okFn)
		require.NoError(t, err)

		entered, release := make(chan struct{}), make(chan struct{})
		holder := make(chan error, 1)
		go func() {
			_, _, err := s.Do(context.Background(), Write{Key: k, Epoch: 5}, func(context.Context) (*Response, error) {
				close(entered)
				<-release
				return &Response{Status: 200}, nil
			})
			holder <- err
		}()
		<-entered
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		results := make(chan error, 2)
		for _, e := range []uint64{5, 7} {
			go func() {
				_, _, err := s.Do(ctx, Write{Key: k, Epoch: e}, okFn)
				results <- err
			}()
		}
		waitFor(t, "two waiters", func() bool { return s.waitersFor(k) == 2 })
		// A replay for epoch 6 raises the floor without taking the task.
		_, o, err := s.Do(context.Background(), Write{Key: k, Epoch: 6, IdempotencyKey: "done"}, okFn)
		require.NoError(t, err)
		require.Equal(t, Replayed, o)
		close(release)
		require.NoError(t, <-holder)
		var stale, ok int
		for range 2 {
			err := <-results
			switch {
			case err == nil:
				ok++
			case errors.Is(err, ErrStale):
				stale++
			default:
				t.Fatalf("round %d: %v", i, err)
			}
		}
		cancel()
		require.Equal(t, 1, stale, "round %d: epoch 5 is stale after the replay at 6", i)
		require.Equal(t, 1, ok, "round %d: epoch 7 ran", i)
	}
}

// TestMemStoreKeyRunsOnceUnderRace: owners racing over the same steps
// (same keys and payloads, epochs rising as the task is reclaimed) get the
// step executed at most once per key; every successful answer for a key
// is that one execution's response.
func TestMemStoreKeyRunsOnceUnderRace(t *testing.T) {
	s, err := NewMemStore(MemStoreConfig{})
	require.NoError(t, err)
	seed := testSeed(t)
	const keys = 5
	var runs [keys]atomic.Int32
	var epoch atomic.Uint64
	epoch.Store(1)
	var mu sync.Mutex
	answers := map[string]map[string]bool{}
	var wg sync.WaitGroup
	for c := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			for range 40 {
				k := rng.IntN(keys)
				e := epoch.Load()
				if rng.IntN(5) == 0 {
					e = epoch.Add(1)
				}
				key := "step-" + strconv.Itoa(k)
				w := Write{Key: TaskKey{Task: "t"}, Epoch: e, IdempotencyKey: key, Fingerprint: PayloadFingerprint("POST", "/", []byte(key))}
				resp, _, err := s.Do(context.Background(), w, func(context.Context) (*Response, error) {
					n := runs[k].Add(1)
					return &Response{Status: 200, Body: fmt.Appendf(nil, "%s run %d epoch %d", key, n, e)}, nil
				})
				if err != nil {
					if !errors.Is(err, ErrStale) && !errors.Is(err, ErrInProgress) {
						t.Errorf("seed %d: %v", seed, err)
					}
					continue
				}
				mu.Lock()
				if answers[key] == nil {
					answers[key] = map[string]bool{}
				}
				answers[key][string(resp.Body)] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for k := range keys {
		require.LessOrEqual(t, runs[k].Load(), int32(1), "seed %d: step-%d ran twice", seed, k)
		require.LessOrEqual(t, len(answers["step-"+strconv.Itoa(k)]), 1, "seed %d: step-%d answered differently: %v", seed, k, answers)
	}
}
