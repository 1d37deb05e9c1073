package deploy

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/config"
)

// fencepostRoles are the subcommands that read a role's configuration.
var fencepostRoles = map[string]config.Role{
	"server":  config.RoleServer,
	"sidecar": config.RoleSidecar,
	"fenced":  config.RoleFenced,
	"dev":     config.RoleDev,
	// fencepost capture reads the sidecar's file, environment and flags.
	"capture": config.RoleSidecar,
}

// envKnown reports whether name is an environment variable of role: a key's
// variable, a map entry's (FENCEPOST_LEASES_PROFILES_<NAME>_TTL) or
// FENCEPOST_CONFIG.
func envKnown(role config.Role, name string) bool {
	if name == config.EnvConfigPath {
		return true
	}
	for _, k := range config.Keys(role) {
		before, after, wild := strings.Cut(k.Env, "*")
		if !wild {
			if k.Env == name {
				return true
			}
			continue
		}
		if len(name) > len(before)+len(after) && strings.HasPrefix(name, before) && strings.HasSuffix(name, after) {
			return true
		}
	}
	return false
}

// launch is how one container or service starts fencepost, with every
// deployment-time substitution already made.
type launch struct {
	where string            // for messages: "k8s/server.yaml StatefulSet/fencepost pod fencepost-1"
	args  []string          // after the binary: the subcommand, then flags
	env   map[string]string // the container's environment
	// files maps paths inside the container to their content (ConfigMap
	// mounts); a --config path must be one of them.
	files map[string]string
}

// loaded is the outcome of checkLaunch: the role and its effective
// configuration.
type loaded struct {
	role config.Role
	cfg  config.Config
}

// checkLaunch checks that l starts a known role with only known flags and
// FENCEPOST_* variables of that role, that its config file (if any) is valid
// on its own, and that file + environment + flags load and validate the way
// the binary would load them. It returns the effective configuration.
func checkLaunch(t *testing.T, l launch) loaded {
	t.Helper()
	require.NotEmpty(t, l.args, "%s: no subcommand", l.where)
	role, ok := fencepostRoles[l.args[0]]
	require.True(t, ok, "%s: subcommand %q is not one of server, sidecar, fenced, dev", l.where, l.args[0])

	fs := flag.NewFlagSet(l.args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	flags := config.BindFlags(fs, role)
	require.NoError(t, fs.Parse(l.args[1:]), "%s: flags %q", l.where, l.args[1:])
	require.Zero(t, fs.NArg(), "%s: stray arguments %q", l.where, fs.Args())

	var env []string
	for name, value := range l.env {
		if strings.HasPrefix(name, config.EnvPrefix) {
			require.True(t, envKnown(role, name), "%s: %s is not an environment variable of fencepost %s (see `fencepost config keys %s`)", l.where, name, role, role)
			require.NotContains(t, value, "$(", "%s: %s=%q still holds an unexpanded reference", l.where, name, value)
		}
		env = append(env, name+"="+value)
	}

	path := flags.Path()
	if path == "" {
		path = l.env[config.EnvConfigPath]
	}
	src := config.Source{Env: env, Flags: flags}
	if path != "" {
		text, ok := l.files[path]
		require.True(t, ok, "%s: config file %s is not mounted (mounted: %v)", l.where, path, keysOf(l.files))
		_, err := config.Parse(role, []byte(text), path)
		require.NoError(t, err, "%s: %s is not a valid %s config on its own", l.where, path, role)
		tmp := filepath.Join(t.TempDir(), filepath.Base(path))
		require.NoError(t, os.WriteFile(tmp, []byte(text), 0o600))
		src.Path = tmp
	}
	cfg, err := config.Load(role, src)
	require.NoError(t, err, "%s: the effective %s configuration (file + env + flags) does not validate", l.where, role)
	return loaded{role: role, cfg: cfg}
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
