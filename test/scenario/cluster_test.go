package scenario

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestClusterStartStopRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := StartCluster(ctx, ClusterConfig{Dir: t.TempDir()})
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	require.Len(t, c.Endpoints(), 3)
	leader, err := c.WaitLeader(ctx)
	require.NoError(t, err)
	require.Len(t, leader.Store.Status().Members, 3)

	require.NoError(t, c.StopNode(leader))
	next, err := c.WaitLeader(ctx)
	require.NoError(t, err)
	require.NotEqual(t, leader.ID, next.ID)
	require.NoError(t, c.RestartNode(leader))
	require.NoError(t, c.WaitReady(ctx))
}
