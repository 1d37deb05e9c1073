package cluster

import (
	"context"
	"net"
	"testing"

	"github.com/fencepost/fencepost/raftstore/httpapi"
	"github.com/fencepost/fencepost/raftstore/httpapi/httpapitest"
	"github.com/stretchr/testify/require"
)

// After a failover the client starts at the member that answered, so a
// dead member costs one dial failure, not one per call.
func TestStartsAtLastEndpointThatWorked(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	require.NoError(t, ln.Close())
	srv, err := httpapi.New(httpapi.Config{Addr: "127.0.0.1:0"}, httpapitest.New())
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	defer func() { require.NoError(t, srv.Close()) }()

	c, err := New(Config{Endpoints: []string{dead, srv.Addr()}})
	require.NoError(t, err)
	defer c.Close()
	require.Equal(t, int32(0), c.current.Load())
	_, err = c.Status(context.Background())
	require.NoError(t, err)
	require.Equal(t, int32(1), c.current.Load())
}

func TestBackoffIsJitteredAndCapped(t *testing.T) {
	c, err := New(Config{Endpoints: []string{"a:1"}, Backoff: 10e6, MaxBackoff: 80e6})
	require.NoError(t, err)
	for round := range 8 {
		d := c.backoff(round)
		want := min(int64(10e6)<<round, 80e6)
		require.GreaterOrEqual(t, int64(d), want/2)
		require.LessOrEqual(t, int64(d), want)
	}
}

// A follower's relayed answer names the leader; a client that has the
// leader among its endpoints goes there directly from then on.
func TestFollowsTheLeaderNamedByAFollower(t *testing.T) {
	leaderStore := httpapitest.New()
	leader, err := httpapi.New(httpapi.Config{Addr: "127.0.0.1:0"}, leaderStore)
	require.NoError(t, err)
	require.NoError(t, leader.Start())
	defer func() { require.NoError(t, leader.Close()) }()
	followerStore := httpapitest.New()
	followerStore.SetFollower(true, leader.Addr())
	follower, err := httpapi.New(httpapi.Config{Addr: "127.0.0.1:0"}, followerStore)
	require.NoError(t, err)
	require.NoError(t, follower.Start())
	defer func() { require.NoError(t, follower.Close()) }()

	require.Equal(t, httpapi.HeaderLeader, headerLeader)
	c, err := New(Config{Endpoints: []string{follower.Addr(), leader.Addr()}})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Leases(context.Background(), false)
	require.NoError(t, err)
	require.Equal(t, int32(1), c.current.Load(), "moved to the leader")
	_, err = c.Leases(context.Background(), false)
	require.NoError(t, err)
	require.Len(t, followerStore.CallsOf("Leases"), 1, "the second call skipped the follower")

	// A leader outside the configured endpoints is never adopted.
	c2, err := New(Config{Endpoints: []string{follower.Addr()}})
	require.NoError(t, err)
	defer c2.Close()
	_, err = c2.Leases(context.Background(), false)
	require.NoError(t, err)
	require.Equal(t, int32(0), c2.current.Load())
}
