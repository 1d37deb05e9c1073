package fence

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func doHolder(t *testing.T, s Store, holder, task string) error {
	t.Helper()
	_, _, err := s.Do(context.Background(), Write{Key: TaskKey{Task: task}, Epoch: 1, Holder: holder}, okFn)
	return err
}

// TestMemStoreOneHolderCannotTakeTheTable replays the probe with the
// defaults: two worker identities each write new tasks until refused.
// Each is stopped at its share (the error names it and the limit), the
// table is not full, and a third identity still writes.
func TestMemStoreOneHolderCannotTakeTheTable(t *testing.T) {
	s, err := NewMemStore(MemStoreConfig{})
	require.NoError(t, err)
	for _, holder := range []string{"worker-a", "worker-b"} {
		n := 0
		for ; ; n++ {
			err = doHolder(t, s, holder, fmt.Sprintf("%s-%d", holder, n))
			if err != nil {
				break
			}
			require.Less(t, n, DefaultMaxTasks, "bounded loop")
		}
		require.ErrorIs(t, err, ErrHolderFull)
		require.ErrorIs(t, err, ErrStoreFull, "answered as store-full")
		require.Equal(t, DefaultMaxTasksPerHolder, n)
		require.Contains(t, ProblemFor(err).Detail, fmt.Sprintf("holder %q", holder))
		require.Contains(t, ProblemFor(err).Detail, fmt.Sprint(DefaultMaxTasksPerHolder))
		// Its known tasks keep working.
		require.NoError(t, doHolder(t, s, holder, holder+"-0"))
	}
	tasks, _ := s.Len()
	require.Equal(t, 2*DefaultMaxTasksPerHolder, tasks)
	require.Less(t, tasks, DefaultMaxTasks)
	require.NoError(t, doHolder(t, s, "worker-c", "c-1"), "another identity still writes")
	require.NoError(t, doHolder(t, s, "", "anonymous-1"), "so does a write without a holder")
}

func TestMemStorePerHolderNeverAboveTheTable(t *testing.T) {
	s, err := NewMemStore(MemStoreConfig{MaxTasks: 3, MaxTasksPerHolder: 2})
	require.NoError(t, err)
	require.NoError(t, doHolder(t, s, "a", "1"))
	require.NoError(t, doHolder(t, s, "a", "2"))
	require.ErrorIs(t, doHolder(t, s, "a", "3"), ErrHolderFull)
	require.NoError(t, doHolder(t, s, "b", "3"))
	err = doHolder(t, s, "b", "4")
	require.ErrorIs(t, err, ErrStoreFull)
	require.NotErrorIs(t, err, ErrHolderFull, "the table is full, not b's share")
	_, err = NewMemStore(MemStoreConfig{MaxTasksPerHolder: -1})
	require.ErrorIs(t, err, ErrInvalidConfig)
}
