package config

import (
	"testing"
	"time"

	"github.com/fencepost/fencepost/proxy/workertie"
	"github.com/stretchr/testify/require"
)

// The CLI's defaults are workertie's, and the keys map onto its Config.
func TestWorkerKeys(t *testing.T) {
	cfg, err := Parse(RoleSidecar, []byte("cluster: [127.0.0.1:7400]\n"), "s.yaml")
	require.NoError(t, err)
	require.Equal(t, workertie.Config{}.WithDefaults(), cfg.(*Sidecar).Worker.Tie())

	body := "cluster: [127.0.0.1:7400]\nworker:\n  on_lost: none\n  restart: on-failure\n  health:\n    url: http://127.0.0.1:8080/healthz\n    threshold: 3\n"
	cfg, err = Parse(RoleSidecar, []byte(body), "s.yaml")
	require.NoError(t, err)
	tie := cfg.(*Sidecar).Worker.Tie()
	require.Equal(t, workertie.OnLostNone, tie.OnLost)
	require.Equal(t, workertie.RestartOnFailure, tie.Restart)
	require.Equal(t, "http://127.0.0.1:8080/healthz", tie.Health.URL)
	require.Equal(t, 3, tie.Health.Threshold)
	require.Equal(t, time.Second, tie.Health.Interval)
	require.NoError(t, tie.Validate())
}

func TestWorkerRules(t *testing.T) {
	for body, want := range map[string]string{
		"worker: {on_lost: maybe}":                                       `worker.on_lost: must be one of "terminate", "none" (got "maybe")`,
		"worker: {restart: always}":                                      `worker.restart: must be one of "never", "on-failure"`,
		"worker: {health: {url: 'http://10.1.2.3/h'}}":                   "worker.health.url: must be an http:// or https:// URL on a loopback address",
		"worker: {health: {url: 'http://127.0.0.1/h', command: [true]}}": "worker.health.command: set worker.health.url or worker.health.command, not both",
		"worker: {health: {timeout: 2s}}":                                "worker.health.timeout: must be <= worker.health.interval",
		"worker: {health: {threshold: -1}}":                              "worker.health.threshold: must be >= 1",
	} {
		_, err := Parse(RoleSidecar, []byte("cluster: [127.0.0.1:7400]\n"+body+"\n"), "s.yaml")
		require.ErrorContains(t, err, want, body)
	}
}
