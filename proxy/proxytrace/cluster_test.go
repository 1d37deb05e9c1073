package proxytrace

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestClusterRouteNamesTheTemplateAndSkipsTheSessionsPulse(t *testing.T) {
	for path, want := range map[string]string{
		"/v1/tasks/t-1/acquire":           "/v1/tasks/{id}/acquire",
		"/v1/tasks/a%2Fb/checkpoint":      "/v1/tasks/{id}/checkpoint",
		"/v1/tasks/t/journal/k-9/outcome": "/v1/tasks/{id}/journal/{key}/outcome",
		"/v1/claim":                       "/v1/claim",
		"/v1/sessions":                    "/v1/sessions",
		"/v1/sessions/s-1":                "/v1/sessions/{sid}",
		"/v1/tasks/t-1/release":           "/v1/tasks/{id}/release",
	} {
		got, ok := clusterRoute(path)
		require.True(t, ok, path)
		require.Equal(t, want, got, path)
	}
	for _, path := range []string{"/v1/sessions/s-1/heartbeat", "/v1/sessions/s-1/watch", "/v1/sessions/s-1/stream"} {
		_, ok := clusterRoute(path)
		require.False(t, ok, "%s is not traced", path)
	}
}

func TestClusterHookIsOffWithoutAProvider(t *testing.T) {
	require.Nil(t, ClusterHook(nil), "tracing off adds no hook to the cluster client")
}
