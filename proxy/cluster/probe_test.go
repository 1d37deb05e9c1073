package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence/pki"
	"github.com/fencepost/fencepost/fence/pki/pkitest"
	"github.com/fencepost/fencepost/proxy/cluster"
	"github.com/fencepost/fencepost/raftstore/httpapi/httpapitest"
	"github.com/fencepost/fencepost/raftstore/node"
)

// ProbeScheme tells a TLS member from a plain one, in both directions, and
// has no verdict on a member it cannot reach.
func TestProbeSchemeFindsTheMismatch(t *testing.T) {
	kit := pkitest.New(t, "cluster")
	secure := httpapitest.StartClusterWith(t, 1, zap.WarnLevel, func(cfg *node.Config) {
		cfg.Store.TLS = kit.Source(pki.RoleMember, cfg.Store.NodeID)
	}).Endpoints()[0]
	plain := serve(t, httpapitest.New())
	dead := deadAddr(t)
	client := kit.Client(pki.RoleSidecar, "w1")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	err := cluster.ProbeScheme(ctx, []string{dead, secure}, nil)
	require.ErrorIs(t, err, cluster.ErrSchemeMismatch)
	require.Equal(t, &cluster.MismatchError{Endpoint: secure, ServerTLS: true}, err)
	require.EqualError(t, err, "cluster member "+secure+" speaks TLS, but this client has no TLS configuration")

	err = cluster.ProbeScheme(ctx, []string{"http://" + plain}, client)
	require.Equal(t, &cluster.MismatchError{Endpoint: "http://" + plain}, err)

	require.NoError(t, cluster.ProbeScheme(ctx, []string{secure}, client), "TLS to TLS")
	require.NoError(t, cluster.ProbeScheme(ctx, []string{plain, "http://" + plain + "/"}, nil), "plain to plain")
	require.NoError(t, cluster.ProbeScheme(ctx, []string{dead}, nil), "unreachable is not a mismatch")
	require.NoError(t, cluster.ProbeScheme(ctx, []string{dead}, client))
}
