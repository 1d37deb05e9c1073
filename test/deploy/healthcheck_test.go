package deploy

import (
	"net"
	"net/url"
	"os/exec"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/config"
)

// composeHealth is the part of a compose service the health checks need.
type composeHealth struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Healthcheck *struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
	} `yaml:"services"`
}

// healthTarget is one compose health check: the role it checks and the
// URL it probes.
type healthTarget struct {
	service, role string
	url           *url.URL
}

// composeHealthTargets checks that every service running the image has a
// health check that runs the image's own binary (there is no shell or curl
// in it) against a health route on the port that role listens on, inside
// the container.
func composeHealthTargets(t *testing.T) []healthTarget {
	t.Helper()
	var c composeHealth
	decodeYAML(t, &c, "compose.yaml")
	var out []healthTarget
	for name, s := range c.Services {
		if !isFencepostImage(s.Image) || isSetupStep(s.Command) {
			continue
		}
		where := "compose.yaml service " + name
		require.NotNil(t, s.Healthcheck, "%s: no healthcheck", where)
		test := s.Healthcheck.Test
		if len(test) == 6 && test[3] == "--ca" {
			// An https probe verifies the cluster against its CA.
			test = append(test[:3:3], test[5])
		}
		require.Len(t, test, 4, "%s: healthcheck: want [CMD, /fencepost, healthcheck, (--ca FILE,) URL], got %q", where, test)
		require.Equal(t, []string{"CMD", "/fencepost", "healthcheck"}, test[:3], "%s: healthcheck", where)
		u, err := url.Parse(test[3])
		require.NoError(t, err, "%s: healthcheck URL", where)
		require.Equal(t, "127.0.0.1", u.Hostname(), "%s: the probe runs inside the container: use loopback", where)
		require.Contains(t, []string{"/readyz", "/healthz"}, u.Path, "%s: healthcheck path", where)

		l := checkLaunch(t, launch{where: where, args: s.Command, env: s.Environment})
		var listen string
		switch cfg := l.cfg.(type) {
		case *config.Server:
			listen = cfg.HTTPAddr
		case *config.Sidecar:
			listen = cfg.ControlAddr
		case *config.Fenced:
			listen = cfg.Addr
		default:
			t.Fatalf("%s: no health route known for %T", where, cfg)
		}
		_, port, err := net.SplitHostPort(listen)
		require.NoError(t, err)
		require.Equal(t, port, u.Port(), "%s: healthcheck must probe the port the role listens on (%s)", where, listen)
		out = append(out, healthTarget{service: name, role: s.Command[0], url: u})
	}
	require.NotEmpty(t, out, "compose.yaml: no fencepost services")
	return out
}

func TestComposeHealthchecks(t *testing.T) {
	targets := composeHealthTargets(t)
	if testing.Short() {
		t.Skip("the live half builds and runs the binary")
	}
	// Run each health check's own command line against a live stack
	// (`fencepost dev` serves every route on loopback), the port swapped for
	// the dev stack's port of that role.
	bin := buildBinary(t)
	d := startDev(t, bin)
	ports := map[string]int{"server": d.http, "sidecar": d.control, "fenced": d.fenced}
	for _, h := range targets {
		u := *h.url
		u.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[h.role]))
		args := []string{"healthcheck", u.String()}
		if u.Scheme == "https" {
			args = []string{"healthcheck", "--ca", d.caFile, u.String()}
		}
		out, err := exec.Command(bin, args...).CombinedOutput()
		require.NoError(t, err, "compose.yaml service %s: `fencepost healthcheck %s` against dev: %s", h.service, u.String(), out)
	}
}

// isSetupStep reports a one-shot compose service running a set-up command
// of the image (`fencepost tls init`, `fencepost capture`), which has no
// role and no health.
func isSetupStep(command []string) bool {
	return len(command) > 0 && (command[0] == "tls" || command[0] == "capture")
}
