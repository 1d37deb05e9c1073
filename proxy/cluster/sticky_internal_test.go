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
