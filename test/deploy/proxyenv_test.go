package deploy

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// checkNoProxy holds a worker's NO_PROXY to the README's rule: the control
// API's address (127.0.0.1) and never localhost, which curl, Python and Go
// match as a suffix, so it would send fenced.localhost around the sidecar.
func checkNoProxy(t *testing.T, where, name, value string) {
	t.Helper()
	entries := strings.Split(value, ",")
	require.Contains(t, entries, "127.0.0.1", "%s: %s must exempt the control API on 127.0.0.1", where, name)
	for _, e := range entries {
		require.NotContains(t, strings.ToLower(strings.TrimSpace(e)), "localhost",
			"%s: %s=%s: never put localhost in NO_PROXY (README, \"Services on the worker's own host\")", where, name, value)
	}
}

// caVariables are the variables the README's HTTPS section sets in the
// worker, one per client family.
var caVariables = []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"}

// checkHTTPSEnv holds a worker beside an intercepting sidecar to the
// README's HTTPS section: HTTPS_PROXY (both cases) at the sidecar's proxy,
// NODE_USE_ENV_PROXY, and the four CA variables naming one file that is
// the sidecar's bundle (sameBundle says whether a worker path is it).
func checkHTTPSEnv(t *testing.T, where string, env map[string]string, proxyAddr string, sameBundle func(string) bool) {
	t.Helper()
	for _, name := range []string{"HTTPS_PROXY", "https_proxy"} {
		require.Equal(t, "http://127.0.0.1:"+portOf(proxyAddr), env[name], "%s: %s must be the sidecar's proxy_addr", where, name)
	}
	require.Equal(t, "1", env["NODE_USE_ENV_PROXY"], "%s: NODE_USE_ENV_PROXY=1 (Node 24 reads the proxy variables only then)", where)
	bundle := env[caVariables[0]]
	for _, name := range caVariables {
		require.NotEmpty(t, env[name], "%s: %s must name the sidecar's CA bundle", where, name)
		require.Equal(t, bundle, env[name], "%s: %s and %s name different files", where, name, caVariables[0])
	}
	require.True(t, sameBundle(bundle), "%s: %s=%s is not the file the sidecar writes (intercept.bundle_file, through a shared volume)", where, caVariables[0], bundle)
}

// volumePath is a file on a named volume: the volume and the path in it.
type volumePath struct{ volume, rel string }

// composeVolumePath finds the named volume of svc that holds path.
func composeVolumePath(t *testing.T, svc composeService, path string) volumePath {
	t.Helper()
	for _, v := range svc.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || strings.HasPrefix(parts[0], ".") || strings.HasPrefix(parts[0], "/") {
			continue
		}
		if rel, err := filepath.Rel(parts[1], path); err == nil && !strings.HasPrefix(rel, "..") {
			return volumePath{parts[0], rel}
		}
	}
	return volumePath{}
}

// podVolumePath finds the pod volume a container mounts that holds path.
func podVolumePath(c container, path string) volumePath {
	for _, m := range c.VolumeMounts {
		if rel, err := filepath.Rel(m.MountPath, path); err == nil && !strings.HasPrefix(rel, "..") {
			return volumePath{m.Name, rel}
		}
	}
	return volumePath{}
}
