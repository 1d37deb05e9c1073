package cluster_test

import (
	"net"
	"testing"
	"time"

	"github.com/fencepost/fencepost/proxy/cluster"
	"github.com/fencepost/fencepost/raftstore/httpapi"
	"github.com/fencepost/fencepost/raftstore/httpapi/httpapitest"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
)

// serve starts the real HTTP API over store on a free loopback port.
func serve(t *testing.T, store httpapi.Store) string {
	t.Helper()
	s, err := httpapi.New(httpapi.Config{Addr: "127.0.0.1:0", Logger: zaptest.NewLogger(t)}, store)
	require.NoError(t, err)
	require.NoError(t, s.Start())
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s.Addr()
}

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// newClient builds a client with short timeouts, closed at the end.
func newClient(t *testing.T, mod func(*cluster.Config), endpoints ...string) *cluster.Client {
	t.Helper()
	cfg := cluster.Config{Endpoints: endpoints, Timeout: time.Second, Backoff: 5 * time.Millisecond,
		MaxBackoff: 50 * time.Millisecond, Logger: zaptest.NewLogger(t)}
	if mod != nil {
		mod(&cfg)
	}
	c, err := cluster.New(cfg)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// single returns a double store and a client talking to it.
func single(t *testing.T) (*httpapitest.Store, *cluster.Client) {
	t.Helper()
	st := httpapitest.New()
	return st, newClient(t, nil, serve(t, st))
}
