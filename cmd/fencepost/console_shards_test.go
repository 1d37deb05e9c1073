package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/cmd/fencepost/console"
	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/cluster"
	"github.com/fencepost/fencepost/raftstore/httpapi/httpapitest"
)

// consoleGet fetches one console page and returns its status and body.
func consoleGet(t *testing.T, srv *console.Server, path string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(srv.URL() + strings.TrimPrefix(path, "/"))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// TestConsoleAcrossThreeClusters: the console given --clusters lists the
// tasks of all three, shows a task and acts on it in the cluster that
// holds it, lists every cluster's members (each cluster's health on the
// Cluster page, a cluster that is down as one unreachable row) and
// follows every cluster's events in one live feed.
func TestConsoleAcrossThreeClusters(t *testing.T) {
	names := []string{"east", "west", "north"}
	byName := map[string]*httpapitest.Cluster{}
	var spec []string
	for _, n := range names {
		c := httpapitest.StartCluster(t, 1, zap.WarnLevel)
		byName[n] = c
		spec = append(spec, n+"="+c.Endpoints()[0])
	}
	all := "--clusters=" + strings.Join(spec, ";")
	owner := map[string]string{}
	for i := range 9 {
		id := fmt.Sprintf("job-%02d", i)
		ctlOK(t, "127.0.0.1:1", all, "tasks", "create", id)
		owner[id] = cluster.Rank(names, id)[0]
	}
	cfg, msg := consoleConfig(&ctlGlobals{cluster: ctlDefaultCluster, clusters: strings.Join(spec, ";")},
		consoleFlags{listen: "127.0.0.1:0"}, "", zap.NewNop())
	require.Empty(t, msg)
	srv, err := console.Start(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })

	status, body := consoleGet(t, srv, "/tasks")
	require.Equal(t, http.StatusOK, status, body)
	for id := range owner {
		require.Contains(t, body, id, "the list merges every cluster")
	}
	status, body = consoleGet(t, srv, "/cluster")
	require.Equal(t, http.StatusOK, status, body)
	for _, n := range names {
		require.Contains(t, body, n+"/n1", "every cluster's members")
	}

	// Live feed: a baseline, then an event of any cluster arrives.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	feed, err := cfg.Cluster.WatchEvents(ctx, 0, 200*time.Millisecond)
	require.NoError(t, err)
	grant := ctlJSON[api.Grant](t, "127.0.0.1:1", all, "acquire", "job-00", "--worker", "w1")
	seen := false
	for !seen {
		require.NoError(t, ctx.Err(), "the acquire's event reaches the merged feed")
		next, err := cfg.Cluster.WatchEvents(ctx, feed.Next, time.Second)
		require.NoError(t, err)
		require.False(t, next.Reset)
		for _, e := range next.Events {
			seen = seen || e.TaskID == "job-00"
		}
		feed = next
	}

	// Acting goes to the task's cluster.
	tk, err := cfg.Cluster.Revoke(ctx, "job-00", api.RevokeRequest{Epoch: grant.Lease.Epoch, Reason: "test"})
	require.NoError(t, err)
	require.Equal(t, lease.StatusRevoked, tk.Lease.Status)
	status, body = consoleGet(t, srv, "/tasks/job-00")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "job-00")

	// One cluster down: the Cluster page still answers and says which;
	// a task of another cluster still shows.
	down := owner["job-00"]
	byName[down].Kill(0)
	status, body = consoleGet(t, srv, "/cluster")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, down+"/(no answer")
	for id, home := range owner {
		if home != down {
			status, body = consoleGet(t, srv, "/tasks/"+id)
			require.Equal(t, http.StatusOK, status, "%s is in a cluster that is up: %s", id, body)
			break
		}
	}
}
