package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/config"
	"github.com/fencepost/fencepost/fence"
)

// TestFencedBoundsTasksPerHolder replays the probe against `fencepost
// fenced`: one holder writing new tasks stops at max_tasks_per_holder
// (503 store-full naming the holder and its limit), its known tasks still
// write, and a second holder still adds its own.
func TestFencedBoundsTasksPerHolder(t *testing.T) {
	cfg := config.DefaultFenced()
	cfg.Addr, cfg.MaxTasks, cfg.MaxTasksPerHolder = "127.0.0.1:0", 10, 3
	require.NoError(t, cfg.Validate())
	srv, err := startFenced(t.Context(), cfg, zap.NewNop(), newRegistry(), nil)
	require.NoError(t, err)
	defer func() { _ = srv.Close() }()
	write := func(holder, task string) (int, fence.Problem) {
		req, err := http.NewRequest(http.MethodPost, "http://"+srv.Addr()+"/v1/tasks/"+task+"/writes", nil)
		require.NoError(t, err)
		req.Header.Set(fence.HeaderToken, fence.FormatEpoch(1))
		req.Header.Set(fence.HeaderTask, task)
		req.Header.Set(fence.HeaderHolder, holder)
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var p fence.Problem
		if resp.StatusCode >= 400 {
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
		}
		return resp.StatusCode, p
	}
	for i := range 3 {
		status, p := write("worker-a", fmt.Sprintf("a%d", i))
		require.Less(t, status, 300, "%+v", p)
	}
	status, p := write("worker-a", "a3")
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Equal(t, fence.ProblemStoreFull, p.Type)
	require.Contains(t, p.Detail, `holder "worker-a"`)
	require.Contains(t, p.Detail, "MaxTasksPerHolder 3")
	status, _ = write("worker-a", "a0")
	require.Less(t, status, 300, "its known tasks still write")
	status, _ = write("worker-b", "b0")
	require.Less(t, status, 300, "another holder still adds tasks")

	bad := config.DefaultFenced()
	bad.MaxTasksPerHolder = -1
	require.ErrorContains(t, bad.Validate(), "max_tasks_per_holder")
}
