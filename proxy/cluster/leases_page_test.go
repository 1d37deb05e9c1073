package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/raftstore/httpapi/httpapitest"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zapcore"
)

// TestRealLeasesFollowsPages: GET /v1/leases is paged; Leases follows the
// pages (ctl leases list and every caller see every lease), LeasesPage
// returns one.
func TestRealLeasesFollowsPages(t *testing.T) {
	cl := httpapitest.StartCluster(t, 1, zapcore.WarnLevel)
	c := newClient(t, nil, cl.Endpoints()...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sess, err := c.OpenSession(ctx, api.OpenSessionRequest{WorkerID: "w1"})
	require.NoError(t, err)
	const n = 12
	for i := range n {
		_, err := c.Acquire(ctx, fmt.Sprintf("t%02d", i), api.AcquireRequest{SessionID: sess.SessionID, Create: true})
		require.NoError(t, err)
	}
	page, err := c.LeasesPage(ctx, api.LeasePage{Limit: 5}, false)
	require.NoError(t, err)
	require.Len(t, page.Leases, 5)
	require.Equal(t, "t04", page.Next)
	page, err = c.LeasesPage(ctx, api.LeasePage{After: "t09", Limit: 5}, true)
	require.NoError(t, err)
	require.Len(t, page.Leases, 2)
	require.Empty(t, page.Next)
	all, err := c.Leases(ctx, false)
	require.NoError(t, err)
	require.Len(t, all.Leases, n)
}
