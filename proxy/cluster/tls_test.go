package cluster_test

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/pki"
	"github.com/fencepost/fencepost/fence/pki/pkitest"
	"github.com/fencepost/fencepost/proxy/cluster"
	"github.com/fencepost/fencepost/raftstore/httpapi/httpapitest"
	"github.com/fencepost/fencepost/raftstore/node"
)

// TestClientVerifiesTheClusterOverTLS runs a 3-member TLS cluster: a
// client with the cluster CA works through any member (followers forward
// over TLS); one trusting another CA, or without TLS, gets nothing.
func TestClientVerifiesTheClusterOverTLS(t *testing.T) {
	kit := pkitest.New(t, "cluster")
	c := httpapitest.StartClusterWith(t, 3, zap.WarnLevel, func(cfg *node.Config) {
		cfg.Store.TLS = kit.Source(pki.RoleMember, cfg.Store.NodeID)
	})
	eps := c.Endpoints()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	reader := newClient(t, func(cfg *cluster.Config) { cfg.TLS = kit.Client(pki.RoleReader, "r1") }, eps[c.Follower()])
	st, err := reader.Status(ctx)
	require.NoError(t, err)
	require.Len(t, st.Members, 3)
	good := newClient(t, func(cfg *cluster.Config) { cfg.TLS = kit.Client(pki.RoleSidecar, "w1") }, eps[c.Follower()])
	_, err = good.CreateTask(ctx, api.CreateTaskRequest{TaskID: "t1"})
	require.NoError(t, err, "a mutation through a follower is forwarded over TLS")
	_, err = good.Status(ctx)
	require.ErrorContains(t, err, "403", "a sidecar's certificate does not read the cluster's status")

	// The cluster's CA but no certificate of its own: verified server,
	// anonymous caller, refused everything but the public routes.
	anon := kit.Client(pki.RoleSidecar, "w1")
	anon.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &tls.Certificate{}, nil }
	nocert := newClient(t, func(cfg *cluster.Config) { cfg.TLS = anon; cfg.Retries = -1 }, eps[c.Follower()])
	_, err = nocert.CreateTask(ctx, api.CreateTaskRequest{TaskID: "t2"})
	require.ErrorContains(t, err, "401", "without a client certificate nothing is created")

	stranger := newClient(t, func(cfg *cluster.Config) {
		cfg.TLS = pkitest.New(t, "other").Client(pki.RoleSidecar, "w1")
		cfg.Retries = -1
	}, eps[0])
	_, err = stranger.Status(ctx)
	require.ErrorContains(t, err, "certificate", "a server the client's CA did not sign is refused")

	plain := newClient(t, func(cfg *cluster.Config) { cfg.Retries = -1 }, eps[0])
	_, err = plain.Status(ctx)
	require.Error(t, err, "plain HTTP to the TLS port gets no answer")

	_, err = cluster.New(cluster.Config{Endpoints: []string{"http://" + eps[0]}, TLS: kit.Client(pki.RoleSidecar, "w1")})
	require.ErrorIs(t, err, cluster.ErrConfig, "a TLS client refuses an http:// endpoint rather than downgrade")
}
