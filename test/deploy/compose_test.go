package deploy

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/fencepost/fencepost/config"
)

type composeFile struct {
	Name     string                    `yaml:"name"`
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image           string            `yaml:"image"`
	Build           *composeBuild     `yaml:"build"`
	Hostname        string            `yaml:"hostname"`
	Command         []string          `yaml:"command"`
	Entrypoint      []string          `yaml:"entrypoint"`
	Environment     map[string]string `yaml:"environment"`
	NetworkMode     string            `yaml:"network_mode"`
	Volumes         []string          `yaml:"volumes"`
	Ports           []string          `yaml:"ports"`
	DependsOn       dependsOn         `yaml:"depends_on"`
	Healthcheck     map[string]any    `yaml:"healthcheck"`
	Profiles        []string          `yaml:"profiles"`
	StopGracePeriod string            `yaml:"stop_grace_period"`
	ReadOnly        bool              `yaml:"read_only"`
}

// dependsOn is compose's depends_on in either form: a list of services, or
// a map of service to {condition}. A list entry's condition is
// service_started.
type dependsOn map[string]string

// UnmarshalYAML accepts both forms.
func (d *dependsOn) UnmarshalYAML(n *yaml.Node) error {
	*d = dependsOn{}
	if n.Kind == yaml.SequenceNode {
		var names []string
		if err := n.Decode(&names); err != nil {
			return err
		}
		for _, name := range names {
			(*d)[name] = "service_started"
		}
		return nil
	}
	var m map[string]struct {
		Condition string `yaml:"condition"`
	}
	if err := n.Decode(&m); err != nil {
		return err
	}
	for name, c := range m {
		(*d)[name] = c.Condition
	}
	return nil
}

type composeBuild struct {
	Context    string `yaml:"context"`
	Dockerfile string `yaml:"dockerfile"`
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	var c composeFile
	decodeYAML(t, &c, "compose.yaml")
	require.NotEmpty(t, c.Services, "compose.yaml: no services")
	return c
}

// TestComposeReferences checks what compose would resolve: build context
// and Dockerfile, bind-mounted files, named volumes, depends_on and
// network_mode targets.
func TestComposeReferences(t *testing.T) {
	c := loadCompose(t)
	base := deployPath(t)
	for name, s := range c.Services {
		where := "compose.yaml service " + name
		require.True(t, s.Image != "" || s.Build != nil, "%s: neither image nor build", where)
		if s.Build != nil {
			ctx := filepath.Join(base, s.Build.Context)
			_, err := os.Stat(filepath.Join(ctx, "go.mod"))
			require.NoError(t, err, "%s: build context %s is not the module root", where, s.Build.Context)
			_, err = os.Stat(filepath.Join(ctx, s.Build.Dockerfile))
			require.NoError(t, err, "%s: dockerfile %s (relative to the context)", where, s.Build.Dockerfile)
		}
		for _, v := range s.Volumes {
			src, _, ok := strings.Cut(v, ":")
			require.True(t, ok, "%s: volume %q is not source:target", where, v)
			if strings.HasPrefix(src, ".") || strings.HasPrefix(src, "/") {
				_, err := os.Stat(filepath.Join(base, src))
				require.NoError(t, err, "%s: bind mount source %s", where, src)
				continue
			}
			_, ok = c.Volumes[src]
			require.True(t, ok, "%s: named volume %s is not declared under volumes:", where, src)
		}
		for d, cond := range s.DependsOn {
			dep, ok := c.Services[d]
			require.True(t, ok, "%s: depends_on %s: no such service", where, d)
			require.Contains(t, []string{"service_started", "service_healthy", "service_completed_successfully"}, cond,
				"%s: depends_on %s: condition", where, d)
			if cond == "service_healthy" {
				require.NotEmpty(t, dep.Healthcheck, "%s: depends_on %s: service_healthy, but %s has no healthcheck", where, d, d)
			}
		}
		if target, ok := strings.CutPrefix(s.NetworkMode, "service:"); ok {
			_, exists := c.Services[target]
			require.True(t, exists, "%s: network_mode %s: no such service", where, s.NetworkMode)
		}
	}
}

// TestComposeFencepostServices loads every fencepost service's effective
// configuration from its command and environment, and checks the services
// fit together: one bootstrapping node, joins and cluster lists naming the
// server services, the worker sharing its sidecar's network namespace and
// pointing HTTP_PROXY at it.
func TestComposeFencepostServices(t *testing.T) {
	c := loadCompose(t)
	checkComposeCapture(t, c)
	servers := map[string]*config.Server{}
	sidecars := map[string]*config.Sidecar{}
	var fenced []*config.Fenced
	for _, name := range sortedNames(c.Services) {
		s := c.Services[name]
		if !isFencepostImage(s.Image) || isSetupStep(s.Command) {
			continue
		}
		where := "compose.yaml service " + name
		require.Empty(t, s.Entrypoint, "%s: keep the image's ENTRYPOINT; put the subcommand in command", where)
		l := checkLaunch(t, launch{where: where, args: s.Command, env: s.Environment})
		switch cfg := l.cfg.(type) {
		case *config.Server:
			servers[name] = cfg
			require.Equal(t, name, cfg.NodeID, "%s: node_id", where)
			require.Equal(t, net.JoinHostPort(name, portOf(cfg.HTTPAddr)), cfg.HTTPAdvertise, "%s: http_advertise must be the service name", where)
			require.Equal(t, name, hostOf(cfg.RaftAdvertise), "%s: raft_advertise host must be the service name", where)
			require.True(t, slices.ContainsFunc(s.Volumes, func(v string) bool {
				_, target, _ := strings.Cut(v, ":")
				return strings.HasPrefix(cfg.DataDir+"/", strings.TrimSuffix(target, "/")+"/")
			}), "%s: data_dir %s is not on a volume", where, cfg.DataDir)
		case *config.Sidecar:
			sidecars[name] = cfg
			require.NotEmpty(t, s.StopGracePeriod, "%s: stop_grace_period", where)
			grace, err := time.ParseDuration(s.StopGracePeriod)
			require.NoError(t, err, "%s: stop_grace_period", where)
			require.Less(t, cfg.DrainTimeout.Std(), grace, "%s: drain_timeout must end inside stop_grace_period", where)
		case *config.Fenced:
			fenced = append(fenced, cfg)
		}
	}
	require.Len(t, servers, 3, "compose.yaml: a 3-node cluster")
	require.NotEmpty(t, sidecars, "compose.yaml: no sidecar")
	require.NotEmpty(t, fenced, "compose.yaml: no fenced service")

	isServerAPI := func(ep string) bool {
		s, ok := servers[hostOf(ep)]
		return ok && portOf(ep) == portOf(s.HTTPAddr)
	}
	boot := 0
	for name, s := range servers {
		if s.ShouldBootstrap() {
			boot++
			continue
		}
		for _, ep := range s.Join {
			require.True(t, isServerAPI(ep) && hostOf(ep) != name, "service %s: join %q is not another server's API", name, ep)
		}
	}
	require.Equal(t, 1, boot, "compose.yaml: exactly one server bootstraps")
	for _, f := range fenced {
		if f.KeysFrom != "" {
			require.True(t, isServerAPI(f.KeysFrom), "fenced: keys_from %q is not a server's API", f.KeysFrom)
		}
	}
	for name, sc := range sidecars {
		for _, ep := range sc.Cluster {
			require.True(t, isServerAPI(ep), "service %s: cluster endpoint %q is not a server's API", name, ep)
		}
		workers := 0
		for wname, w := range c.Services {
			if w.NetworkMode != "service:"+name || isSetupStep(w.Command) {
				continue // the capture step shares the namespace but is no worker
			}
			workers++
			for _, v := range []string{"HTTP_PROXY", "http_proxy"} {
				require.Equal(t, fmt.Sprintf("http://127.0.0.1:%s", portOf(sc.ProxyAddr)), w.Environment[v], "service %s: %s must be its sidecar's proxy_addr", wname, v)
			}
			for _, v := range []string{"NO_PROXY", "no_proxy"} {
				checkNoProxy(t, "compose.yaml service "+wname, v, w.Environment[v])
			}
			if len(sc.Intercept.Hosts) > 0 {
				// The worker reads the bundle the sidecar writes: the same
				// named volume, mounted in both.
				bundle := composeVolumePath(t, c.Services[name], sc.Intercept.BundleFile)
				require.NotEmpty(t, bundle.volume, "service %s: intercept.bundle_file %s is not on a named volume the worker can mount", name, sc.Intercept.BundleFile)
				checkHTTPSEnv(t, "compose.yaml service "+wname, w.Environment, sc.ProxyAddr, func(p string) bool {
					return composeVolumePath(t, w, p) == bundle
				})
			}
		}
		require.NotZero(t, workers, "service %s: no worker shares its network namespace (network_mode: service:%s)", name, name)
	}
}

func sortedNames[V any](m map[string]V) []string {
	out := keysOf(m)
	slices.Sort(out)
	return out
}

// TestComposePublishedPortsDistinct catches two services publishing one
// host port.
func TestComposePublishedPortsDistinct(t *testing.T) {
	c := loadCompose(t)
	seen := map[string]string{}
	for _, name := range sortedNames(c.Services) {
		for _, p := range c.Services[name].Ports {
			parts := strings.Split(p, ":")
			require.GreaterOrEqual(t, len(parts), 2, "service %s: publish %q as [ip:]host:container", name, p)
			host := strings.Join(parts[:len(parts)-1], ":")
			_, err := strconv.Atoi(parts[len(parts)-2])
			require.NoError(t, err, "service %s: host port in %q", name, p)
			require.Empty(t, seen[host], "service %s publishes %s, as does %s", name, host, seen[host])
			seen[host] = name
		}
	}
}

// TestComposeMonitoring checks that the Prometheus in compose loads
// rules.yaml where it is mounted and scrapes real services on their API
// ports, and that Grafana's provisioning finds the dashboard.
func TestComposeMonitoring(t *testing.T) {
	c := loadCompose(t)
	mounts := func(svc string) map[string]string { // target -> source
		out := map[string]string{}
		for _, v := range c.Services[svc].Volumes {
			parts := strings.Split(v, ":")
			if len(parts) >= 2 {
				out[parts[1]] = parts[0]
			}
		}
		return out
	}
	var prom struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	decodeYAML(t, &prom, "prometheus", "prometheus.yml")
	pm := mounts("prometheus")
	require.NotEmpty(t, prom.RuleFiles, "prometheus.yml: rule_files")
	for _, rf := range prom.RuleFiles {
		require.Equal(t, "./prometheus/rules.yaml", pm[rf], "prometheus.yml: rule file %s must be deploy/prometheus/rules.yaml mounted there", rf)
	}
	targets := 0
	for _, sc := range prom.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			for _, tg := range st.Targets {
				targets++
				s, ok := c.Services[hostOf(tg)]
				require.True(t, ok, "prometheus.yml job %s: target %s is not a compose service", sc.JobName, tg)
				l := checkLaunch(t, launch{where: "compose.yaml service " + hostOf(tg), args: s.Command, env: s.Environment})
				switch cfg := l.cfg.(type) {
				case *config.Server:
					require.Equal(t, portOf(cfg.HTTPAddr), portOf(tg), "prometheus.yml: %s scrapes the API port", tg)
				case *config.Fenced:
					require.Equal(t, portOf(cfg.Addr), portOf(tg), "prometheus.yml: %s scrapes fenced's port", tg)
				default:
					t.Fatalf("prometheus.yml: %s runs %s, whose metrics are not reachable from another container", tg, l.role)
				}
			}
		}
	}
	require.NotZero(t, targets, "prometheus.yml: no targets")

	var prov struct {
		Providers []struct {
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	decodeYAML(t, &prov, "grafana", "provisioning", "dashboards", "fencepost.yaml")
	require.Len(t, prov.Providers, 1)
	gm := mounts("grafana")
	found := false
	for target, src := range gm {
		if src == "./grafana/fencepost.json" {
			found = true
			require.Equal(t, prov.Providers[0].Options.Path, filepath.Dir(target), "grafana: the dashboard must be mounted in the provider's path")
		}
	}
	require.True(t, found, "grafana: deploy/grafana/fencepost.json is not mounted")
	require.Equal(t, "./grafana/provisioning", gm["/etc/grafana/provisioning"], "grafana: provisioning directory")
}

// checkComposeCapture: the capture step (a one-shot setup step) runs in the
// sidecar's network namespace, before the worker, with the sidecar's
// capture port and the uid the sidecar's image runs as, and its
// configuration loads as fencepost capture would load it.
func checkComposeCapture(t *testing.T, c composeFile) {
	t.Helper()
	s, ok := c.Services["capture"]
	require.True(t, ok, "compose.yaml: no capture service (README \"Closing the bypass\")")
	require.Equal(t, []string{"capture"}, s.Command[:1])
	require.Equal(t, "service:sidecar", s.NetworkMode, "compose.yaml service capture: in the sidecar's network namespace")
	var env []string
	for k, v := range s.Environment {
		env = append(env, k+"="+v)
	}
	cfg, err := config.LoadCapture(config.Source{Env: env}, true)
	require.NoError(t, err, "compose.yaml service capture: its configuration")
	require.Equal(t, 65532, cfg.Capture.SidecarUID, "compose.yaml service capture: the sidecar image's uid is excluded")
	require.Equal(t, c.Services["sidecar"].Environment["FENCEPOST_CAPTURE_LISTEN"], cfg.Capture.Listen, "compose.yaml: capture and sidecar agree on capture.listen")
}
