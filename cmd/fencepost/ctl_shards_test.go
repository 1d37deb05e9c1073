package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/cluster"
	"github.com/fencepost/fencepost/raftstore/httpapi/httpapitest"
)

// TestCtlAcrossThreeClusters: with --clusters, each task lives in the one
// cluster rendezvous hashing names (and only there), lists merge every
// cluster's tasks and page through them without gaps or repeats, and a
// cluster that is down fails only its own tasks.
func TestCtlAcrossThreeClusters(t *testing.T) {
	names := []string{"east", "west", "north"}
	byName := map[string]*httpapitest.Cluster{}
	var spec []string
	var shards []cluster.Shard
	for _, n := range names {
		c := httpapitest.StartCluster(t, 1, zap.WarnLevel)
		byName[n] = c
		spec = append(spec, n+"="+c.Endpoints()[0])
		cl, err := cluster.New(cluster.Config{Endpoints: c.Endpoints()})
		require.NoError(t, err)
		t.Cleanup(cl.Close)
		shards = append(shards, cluster.Shard{Name: n, Client: cl})
	}
	router, err := cluster.NewShards(shards)
	require.NoError(t, err)
	all := "--clusters=" + strings.Join(spec, ";")
	owner := map[string]string{}
	for i := range 24 {
		id := fmt.Sprintf("job-%02d", i)
		ctlOK(t, "127.0.0.1:1", all, "tasks", "create", id)
		owner[id] = router.For(id).Name
	}
	for id, home := range owner {
		for _, n := range names {
			code, _, _ := ctl(t, byName[n].Endpoints()[0], "tasks", "get", id)
			if n == home {
				require.Equal(t, exitOK, code, "%s lives in %s", id, n)
			} else {
				require.Equal(t, exitNotFound, code, "%s is not in %s", id, n)
			}
		}
	}
	var seen []string
	after := ""
	for page := 0; ; page++ {
		require.Less(t, page, 10)
		list := ctlJSON[api.TaskList](t, "127.0.0.1:1", all, "tasks", "list", "--limit", "5", "--after", after)
		require.LessOrEqual(t, len(list.Tasks), 5)
		for _, tk := range list.Tasks {
			seen = append(seen, tk.ID)
		}
		if list.Next == "" {
			break
		}
		after = list.Next
	}
	require.Len(t, seen, len(owner), "every task listed once: %v", seen)
	for i := 1; i < len(seen); i++ {
		require.Less(t, seen[i-1], seen[i], "in id order, no repeats")
	}
	sess := ctlJSON[api.Grant](t, "127.0.0.1:1", all, "acquire", "job-00", "--worker", "w1")
	require.Equal(t, lease.StatusActive, sess.Lease.Status)
	leases := ctlJSON[api.LeaseList](t, "127.0.0.1:1", all, "leases", "list")
	require.Len(t, leases.Leases, 1)

	// One cluster down: only its tasks fail.
	down := owner["job-00"]
	byName[down].Kill(0)
	for id, home := range owner {
		code, _, _ := ctl(t, "127.0.0.1:1", all, "tasks", "get", id, "--timeout", "1s")
		if home == down {
			require.Equal(t, exitRuntime, code, "%s is in the cluster that is down", id)
		} else {
			require.Equal(t, exitOK, code, "%s is unaffected by %s being down", id, down)
		}
	}
	ctlFails(t, "127.0.0.1:1", exitUsage, []string{all, "status"}, "--clusters", "--cluster")
	ctlFails(t, "127.0.0.1:1", exitUsage, []string{"--clusters=east", "tasks", "get", "x"}, "NAME=ADDR")
}
