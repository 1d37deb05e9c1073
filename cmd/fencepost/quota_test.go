package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/config"
	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/raftstore"
	"github.com/fencepost/fencepost/raftstore/httpapi"
)

// TestQuotaDefaultsAgree: the server's configured quota defaults are the
// store's own, and the file's 0 (unlimited) stays unlimited in the store.
func TestQuotaDefaultsAgree(t *testing.T) {
	q := config.DefaultServer().Leases.Quota
	require.Equal(t, lease.Quota{Sessions: raftstore.DefaultQuotaSessions, Tasks: raftstore.DefaultQuotaTasks,
		Bytes: raftstore.DefaultQuotaBytes, TotalBytes: raftstore.DefaultPayloadBudget}, quota(q))
	require.Equal(t, lease.Quota{Sessions: -1, Tasks: 5, Bytes: -1, TotalBytes: -1}, quota(config.Quota{Tasks: 5}))
	require.Less(t, raftstore.DefaultQuotaTasks, fence.DefaultMaxTasksPerHolder,
		"a sidecar within its task quota stays within its share of a fenced store")
	require.Less(t, fence.DefaultMaxTasksPerHolder, fence.DefaultMaxTasks)
	require.Less(t, int64(raftstore.DefaultQuotaBytes), int64(raftstore.DefaultPayloadBudget))
}

// TestRateDefaultsAgree: the configured request rate defaults are the API
// server's own, and the file's 0 (unlimited) is the server's unlimited.
func TestRateDefaultsAgree(t *testing.T) {
	perSecond, burst := rate(config.DefaultServer().Leases.Quota)
	require.Equal(t, [2]int{httpapi.DefaultRatePerIdentity, httpapi.DefaultRateBurst}, [2]int{perSecond, burst})
	perSecond, burst = rate(config.Quota{})
	require.Equal(t, [2]int{-1, -1}, [2]int{perSecond, burst})
}
