package console

import (
	"context"
	"fmt"
	"testing"

	"github.com/fencepost/fencepost/fence/lease"
	"github.com/stretchr/testify/require"
)

func TestListPagesThroughEveryTaskOnceInOrder(t *testing.T) {
	f := newFakeCluster()
	var want []string
	for i := range 2345 {
		want = append(want, fmt.Sprintf("t-%05d", i))
	}
	f.createTasks(t, "", want...)
	var got []string
	q := listQuery{Limit: 100}
	pages := 0
	for {
		p, err := listTasks(context.Background(), f, q)
		require.NoError(t, err)
		pages++
		for _, tk := range p.Tasks {
			got = append(got, tk.ID)
		}
		if p.Next == "" {
			break
		}
		require.Len(t, p.Tasks, 100)
		q.After = p.Next
	}
	require.Equal(t, want, got)
	require.Equal(t, 24, pages)
	require.Equal(t, 24, f.listings, "one API call per unfiltered page")
}

func TestListPrefixStartsAtThePrefixAndStopsAfterIt(t *testing.T) {
	f := newFakeCluster()
	f.createTasks(t, "", "a", "az", "b", "b-1", "b.2", "b1", "ba", "b@x", "bz", "c", "c1")
	f.createTasks(t, "", "0a", "0b", "1")
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"b", []string{"b", "b-1", "b.2", "b1", "b@x", "ba", "bz"}},
		{"b1", []string{"b1"}},
		{"0", []string{"0a", "0b"}},
		{"c", []string{"c", "c1"}},
		{"d", nil},
	} {
		p, err := listTasks(context.Background(), f, listQuery{Prefix: tc.prefix})
		require.NoError(t, err)
		var got []string
		for _, tk := range p.Tasks {
			got = append(got, tk.ID)
		}
		require.Equal(t, tc.want, got, "prefix %q", tc.prefix)
		require.Empty(t, p.Next)
	}
	_, err := listTasks(context.Background(), f, listQuery{Prefix: "b/"})
	require.ErrorIs(t, err, errBadQuery)
}

func TestListFilterStopsAtTheScanBudgetAndGoesOn(t *testing.T) {
	f := newFakeCluster()
	var ids []string
	for i := range ScanBudget + 1500 {
		ids = append(ids, fmt.Sprintf("t-%05d", i))
	}
	f.createTasks(t, "short", ids...)
	f.createTasks(t, "workflow", "z-last")
	p, err := listTasks(context.Background(), f, listQuery{Profile: "workflow"})
	require.NoError(t, err)
	require.Empty(t, p.Tasks)
	require.True(t, p.Partial)
	require.Equal(t, ScanBudget, p.Scanned)
	require.Equal(t, ids[ScanBudget-1], p.Next, "the next page goes on where the scan stopped")
	p, err = listTasks(context.Background(), f, listQuery{Profile: "workflow", After: p.Next})
	require.NoError(t, err)
	require.Len(t, p.Tasks, 1)
	require.Equal(t, "z-last", p.Tasks[0].ID)
	require.False(t, p.Partial)
}

func TestListFiltersByWorkerAndState(t *testing.T) {
	f := newFakeCluster()
	f.createTasks(t, "", "p1", "p2")
	f.acquire(t, "w1", "held-1")
	f.acquire(t, "w2", "held-2")
	p, err := listTasks(context.Background(), f, listQuery{Worker: "w2"})
	require.NoError(t, err)
	require.Len(t, p.Tasks, 1)
	require.Equal(t, "held-2", p.Tasks[0].ID)
	p, err = listTasks(context.Background(), f, listQuery{State: lease.TaskPending})
	require.NoError(t, err)
	require.Len(t, p.Tasks, 2)
}
