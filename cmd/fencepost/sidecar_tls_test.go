package main

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/fencepost/fencepost/config"
	"github.com/fencepost/fencepost/fence/pki"
	"github.com/fencepost/fencepost/fence/pki/pkitest"
	"github.com/fencepost/fencepost/proxy"
	"github.com/fencepost/fencepost/proxy/cluster"
	"github.com/fencepost/fencepost/raftstore/httpapi/httpapitest"
	"github.com/fencepost/fencepost/raftstore/node"
)

// TestSidecarCertificateAgainstTLSCluster: a sidecar started from its
// configuration with cluster_tls holding a sidecar certificate opens its
// session and holds its task on a TLS cluster (authorization passes);
// one that trusts the cluster's CA but presents no certificate of its own
// is refused (401) and never holds anything.
func TestSidecarCertificateAgainstTLSCluster(t *testing.T) {
	kit := pkitest.New(t, "cluster")
	c := httpapitest.StartClusterWith(t, 1, zap.WarnLevel, func(cfg *node.Config) {
		cfg.Store.TLS = kit.Source(pki.RoleMember, cfg.Store.NodeID)
	})
	ep := c.Endpoints()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	files := kit.Files(pki.RoleSidecar, "w1", 24*time.Hour)
	cfg := config.DefaultSidecar()
	cfg.ProxyAddr, cfg.ControlAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Cluster, cfg.WorkerID, cfg.Task = []string{ep}, "w1", "job-1"
	cfg.ClusterTLS = config.CertFiles{CAFile: files.CA, CertFile: files.Cert, KeyFile: files.Key}
	require.NoError(t, cfg.Validate())
	sc, err := startSidecar(ctx, cfg, zap.NewNop(), newRegistry(), nil)
	require.NoError(t, err)
	defer func() { require.NoError(t, stopSidecar(sc, cfg)) }()
	require.True(t, waitHeld(ctx, sc, "job-1", 20*time.Second), "the sidecar with its certificate holds the task")

	// Same CA, no client certificate: the cluster sees an anonymous caller.
	anon := kit.Client(pki.RoleSidecar, "w2")
	anon.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &tls.Certificate{}, nil }
	cc, err := cluster.New(cluster.Config{Endpoints: []string{ep}, TLS: anon})
	require.NoError(t, err)
	defer cc.Close()
	core, logs := observer.New(zapcore.WarnLevel)
	anonCfg := sidecarConfig(&config.Sidecar{ProxyAddr: "127.0.0.1:0", ControlAddr: "127.0.0.1:0", Cluster: []string{ep},
		WorkerID: "w2", Task: "job-2", Writes: cfg.Writes, Limits: cfg.Limits, Timeouts: cfg.Timeouts, Heartbeat: cfg.Heartbeat,
		DrainTimeout: cfg.DrainTimeout}, zap.New(core), newRegistry())
	refused, err := proxy.New(anonCfg, cc)
	require.NoError(t, err)
	require.NoError(t, refused.Start(ctx))
	defer func() { _ = refused.Shutdown(context.Background()) }()
	require.Eventually(t, func() bool {
		for _, e := range logs.FilterMessage("open session").All() {
			if err, ok := e.ContextMap()["error"].(string); ok && strings.Contains(err, "401") {
				return true
			}
		}
		return false
	}, 20*time.Second, 20*time.Millisecond, "the session open is refused with 401: %v", logs.All())
	require.Empty(t, refused.Leases(), "the anonymous sidecar holds nothing")
	require.True(t, waitHeld(ctx, sc, "job-1", time.Second), "the certified sidecar still holds its task")
}

// TestSidecarRefusesAWorkerIDItsCertificateDoesNotName: the cluster would
// refuse the session (403 worker_not_bound); the sidecar says so at start,
// naming worker_id.
func TestSidecarRefusesAWorkerIDItsCertificateDoesNotName(t *testing.T) {
	kit := pkitest.New(t, "cluster")
	files := kit.Files(pki.RoleSidecar, "w1", 24*time.Hour)
	cfg := config.DefaultSidecar()
	cfg.ProxyAddr, cfg.ControlAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Cluster, cfg.WorkerID = []string{"127.0.0.1:1"}, "someone-else"
	cfg.ClusterTLS = config.CertFiles{CAFile: files.CA, CertFile: files.Cert, KeyFile: files.Key}
	_, err := startSidecar(t.Context(), cfg, zap.NewNop(), newRegistry(), nil)
	require.ErrorIs(t, err, config.ErrInvalid)
	require.ErrorContains(t, err, `worker_id "someone-else"`)
}
