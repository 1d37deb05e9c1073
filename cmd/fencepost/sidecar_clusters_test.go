package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/config"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy"
	"github.com/fencepost/fencepost/proxy/cluster"
	"github.com/fencepost/fencepost/raftstore"
	"github.com/fencepost/fencepost/raftstore/httpapi/httpapitest"
	"github.com/fencepost/fencepost/raftstore/node"
)

// shortLeases gives a test cluster one profile whose lease ends within
// seconds of its holder's last heartbeat, so a fault shows in a test.
func shortLeases(cfg *node.Config) {
	cfg.Store.Profiles = map[string]raftstore.Profile{
		"fast": {TTL: 1500 * time.Millisecond, Heartbeat: 500 * time.Millisecond, ProgressTimeout: time.Minute},
	}
	cfg.Store.DefaultProfile = "fast"
}

// clusterSidecar is a sidecar started from its configuration with the
// clusters key, and what the test needs to drive it.
type clusterSidecar struct {
	sc     *proxy.Sidecar
	cfg    *config.Sidecar
	client *http.Client // through the sidecar's proxy
}

func startClusterSidecar(t *testing.T, worker, spec string) *clusterSidecar {
	t.Helper()
	cfg := config.DefaultSidecar()
	cfg.ProxyAddr, cfg.ControlAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Clusters, cfg.WorkerID = spec, worker
	require.NoError(t, cfg.Validate())
	sc, err := startSidecar(t.Context(), cfg, zap.NewNop(), newRegistry(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = stopSidecar(sc, cfg) })
	pu, err := url.Parse("http://" + sc.ProxyAddr())
	require.NoError(t, err)
	return &clusterSidecar{sc: sc, cfg: cfg, client: &http.Client{
		Transport: &http.Transport{Proxy: http.ProxyURL(pu)}, Timeout: 5 * time.Second,
	}}
}

// control calls the sidecar's control API; it returns the status.
func (s *clusterSidecar) control(t *testing.T, path string, body any) int {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post("http://"+s.sc.ControlAddr()+path, "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// write POSTs to upstream through the proxy as task; it returns the status.
func (s *clusterSidecar) write(t *testing.T, upstream, task string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, upstream+"/act", strings.NewReader("x"))
	require.NoError(t, err)
	req.Header.Set("X-Fencing-Task-Select", task)
	resp, err := s.client.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// TestSidecarAcrossThreeClusters: one sidecar given three clusters keeps a
// session with each and puts every task in the cluster rendezvous hashing
// names, only there; stopping one cluster's members blocks, after the
// local deadline, only that cluster's tasks while the others' writes go
// on and their leases stay current; a fourth cluster added to a sidecar's
// list leaves a task that existed before in its cluster.
func TestSidecarAcrossThreeClusters(t *testing.T) {
	names := []string{"east", "west", "north"}
	byName := map[string]*httpapitest.Cluster{}
	clients := map[string]*cluster.Client{}
	var spec []string
	for _, n := range names {
		c := httpapitest.StartClusterWith(t, 1, zap.WarnLevel, shortLeases)
		byName[n] = c
		spec = append(spec, n+"="+c.Endpoints()[0])
		cl, err := cluster.New(cluster.Config{Endpoints: c.Endpoints()})
		require.NoError(t, err)
		t.Cleanup(cl.Close)
		clients[n] = cl
	}
	var accepted atomic.Int64
	up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		accepted.Add(1)
		w.WriteHeader(http.StatusOK)
	}), ReadHeaderTimeout: 5 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = up.Serve(ln) }()
	t.Cleanup(func() { _ = up.Close() })
	upstream := "http://" + ln.Addr().String()

	s := startClusterSidecar(t, "w1", strings.Join(spec, ";"))
	require.Eventually(t, func() bool {
		for _, c := range s.sc.Clusters() {
			if !c.Session {
				return false
			}
		}
		return true
	}, 20*time.Second, 10*time.Millisecond, "a session with every cluster")

	// Tasks until every cluster owns two.
	owner := map[string]string{}
	count := map[string]int{}
	for i := 0; len(count) < len(names) || min(count["east"], count["west"], count["north"]) < 2; i++ {
		require.Less(t, i, 200)
		id := fmt.Sprintf("job-%03d", i)
		home := cluster.Rank(names, id)[0]
		if count[home] == 2 {
			continue
		}
		owner[id] = home
		count[home]++
		require.Equal(t, http.StatusOK, s.control(t, proxy.PathAcquire, map[string]any{"taskId": id, "create": true}), id)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for id, home := range owner {
		for _, n := range names {
			_, err := clients[n].Task(ctx, id, false)
			if n == home {
				require.NoError(t, err, "%s lives in %s", id, n)
			} else {
				require.ErrorIs(t, err, lease.ErrTaskNotFound, "%s is not in %s", id, n)
			}
		}
		require.Equal(t, http.StatusOK, s.write(t, upstream, id), "%s writes", id)
	}
	require.Len(t, s.sc.Leases(), len(owner), "the lease view covers every cluster")

	// A fourth cluster: a task that existed before stays in its cluster,
	// and is acquired there by a sidecar given all four.
	fourth := httpapitest.StartClusterWith(t, 1, zap.WarnLevel, shortLeases)
	four := append(append([]string(nil), names...), "south")
	moved := ""
	for i := 0; moved == ""; i++ {
		require.Less(t, i, 200)
		if id := fmt.Sprintf("old-%03d", i); cluster.Rank(four, id)[0] == "south" {
			moved = id
		}
	}
	was := cluster.Rank(names, moved)[0]
	require.Equal(t, http.StatusOK, s.control(t, proxy.PathAcquire, map[string]any{"taskId": moved, "create": true}))
	first, err := clients[was].Task(ctx, moved, false)
	require.NoError(t, err)
	require.NotNil(t, first.Lease)
	require.Equal(t, http.StatusOK, s.control(t, proxy.PathGiveBack, map[string]any{"taskId": moved}))
	s4 := startClusterSidecar(t, "w2", strings.Join(append(spec, "south="+fourth.Endpoints()[0]), ";"))
	require.Eventually(t, func() bool { return s4.sc.Clusters()[3].Session }, 20*time.Second, 10*time.Millisecond)
	require.Equal(t, http.StatusOK, s4.control(t, proxy.PathAcquire, map[string]any{"taskId": moved, "create": true}))
	tk, err := clients[was].Task(ctx, moved, false)
	require.NoError(t, err)
	require.NotNil(t, tk.Lease)
	require.Greater(t, tk.Lease.Epoch, first.Lease.Epoch, "a later grant, in the cluster that had the task")
	require.Equal(t, "w2", tk.Lease.WorkerID, "granted to the sidecar given four clusters")
	south, err := cluster.New(cluster.Config{Endpoints: fourth.Endpoints()})
	require.NoError(t, err)
	defer south.Close()
	_, err = south.Task(ctx, moved, false)
	require.ErrorIs(t, err, lease.ErrTaskNotFound, "never created again in the cluster it now hashes to")
	require.Equal(t, http.StatusOK, s4.write(t, upstream, moved))
	// ctl given the four finds it there too (Shards.Locate, the same rule).
	got := ctlJSON[lease.Task](t, "127.0.0.1:1", "--clusters="+strings.Join(append(spec, "south="+fourth.Endpoints()[0]), ";"), "tasks", "get", moved)
	require.Equal(t, moved, got.ID)
	require.Equal(t, "w2", got.Lease.WorkerID)

	// One cluster down: its tasks' writes are blocked once the local
	// deadline passes; every other task keeps its lease and its writes.
	down := owner["job-000"]
	byName[down].Kill(0)
	var blocked, others []string
	for id, h := range owner {
		if h == down {
			blocked = append(blocked, id)
		} else {
			others = append(others, id)
		}
	}
	require.Eventually(t, func() bool {
		for _, id := range blocked {
			if s.write(t, upstream, id) != http.StatusConflict {
				return false
			}
		}
		return true
	}, 20*time.Second, 50*time.Millisecond, "the down cluster's tasks are blocked")
	// Past the down cluster's deadline, and for two more lease lengths,
	// the others write on.
	until := time.Now().Add(3 * time.Second)
	for time.Now().Before(until) {
		for _, id := range others {
			require.Equal(t, http.StatusOK, s.write(t, upstream, id), "%s is in a cluster that is up", id)
		}
	}
	for _, v := range s.sc.Leases() {
		if owner[v.TaskID] != "" && owner[v.TaskID] != down {
			require.True(t, v.Current, "%s keeps its lease", v.TaskID)
		}
	}
	resp, err := http.Get("http://" + s.sc.ControlAddr() + proxy.PathReady)
	require.NoError(t, err)
	why, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "one cluster down does not take the sidecar out of service: %s", why)
	require.Contains(t, string(why), down, "readiness names the cluster without a session")

	// Metrics: per cluster, by name, never by task.
	resp, err = http.Get("http://" + s.sc.ControlAddr() + proxy.PathMetrics)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Contains(t, string(body), fmt.Sprintf(`fencepost_sidecar_cluster_up{cluster=%q} 0`, down))
	for _, n := range names {
		require.Contains(t, string(body), fmt.Sprintf(`fencepost_sidecar_leases_held{cluster=%q}`, n))
	}
	for id := range owner {
		require.NotContains(t, string(body), `"`+id+`"`, "no task id in a metric label")
	}
}
