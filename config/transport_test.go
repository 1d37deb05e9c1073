package config

import (
	"testing"

	"github.com/fencepost/fencepost/proxy"
	"github.com/stretchr/testify/require"
)

func TestSidecarHeartbeatTransport(t *testing.T) {
	cfg, err := Parse(RoleSidecar, []byte("cluster: [127.0.0.1:7400]\n"), "sc.yaml")
	require.NoError(t, err)
	require.Equal(t, proxy.DefaultHeartbeatTransport, cfg.(*Sidecar).HeartbeatTransport)
	require.Equal(t, "stream", cfg.(*Sidecar).HeartbeatTransport)

	cfg, err = Parse(RoleSidecar, []byte("cluster: [127.0.0.1:7400]\nheartbeat_transport: unary\n"), "sc.yaml")
	require.NoError(t, err)
	require.Equal(t, "unary", cfg.(*Sidecar).HeartbeatTransport)

	_, err = Parse(RoleSidecar, []byte("cluster: [127.0.0.1:7400]\nheartbeat_transport: grpc\n"), "sc.yaml")
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, `heartbeat_transport: must be "stream" or "unary" (got "grpc")`)
}
