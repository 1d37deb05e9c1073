package main

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/config"
	"github.com/fencepost/fencepost/proxy"
	"github.com/fencepost/fencepost/raftstore"
)

// The CLI runs the same sidecar and store as a library user who leaves
// every field zero: each default is owned by its package, and the CLI's
// configuration, mapped as the commands map it, lands on exactly those.
func TestCLIDefaultsAreThePackagesDefaults(t *testing.T) {
	log := zap.NewNop()

	sc := config.DefaultSidecar()
	sc.Cluster, sc.WorkerID = []string{"127.0.0.1:7400"}, "w"
	got := sidecarConfig(sc, log, nil).WithDefaults()
	want := proxy.Config{Endpoints: sc.Cluster, WorkerID: "w", Logger: log}.WithDefaults()
	got.Registerer, want.Registerer = nil, nil // a fresh private registry each
	require.Equal(t, want, got)

	srv := config.DefaultServer()
	srv.NodeID, srv.DataDir = "n1", t.TempDir()
	bootstrap := true
	srv.Bootstrap = &bootstrap
	nc, err := nodeConfig(srv, log, nil)
	require.NoError(t, err)
	gotStore := nc.Store.WithDefaults()
	gotStore.Registerer = nil // a typed nil from the nil registry
	wantStore := raftstore.Config{
		NodeID: "n1", DataDir: srv.DataDir, RaftAddr: srv.RaftAddr, RaftAdvertise: srv.RaftAdvertise,
		HTTPAddr: srv.HTTPAdvertise, Bootstrap: true, Logger: log, Version: version,
	}.WithDefaults()
	require.Equal(t, wantStore, gotStore)
}
