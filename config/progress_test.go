package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestProgressTimeoutKey(t *testing.T) {
	cfg, err := Parse(RoleServer, []byte("leases:\n  profiles:\n    batch: {ttl: 2m, heartbeat: 30s, progress_timeout: 1h}\n"), "s.yaml")
	require.NoError(t, err)
	require.Equal(t, Duration(time.Hour), cfg.(*Server).Leases.Profiles["batch"].ProgressTimeout)

	_, err = Parse(RoleServer, []byte("leases:\n  profiles:\n    short: {progress_timeout: 5s}\n"), "s.yaml")
	require.ErrorContains(t, err, "leases.profiles.short.progress_timeout: must be 0 (no progress deadline) or >= ttl (21s, got 5s)")
}
