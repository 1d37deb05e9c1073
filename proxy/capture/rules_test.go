package capture

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRulesOrderAndTags(t *testing.T) {
	p := Plan{ListenPort: 7483, SidecarUID: 1337,
		ExcludeCIDRs: []netip.Prefix{netip.MustParsePrefix("10.1.2.3/32"), netip.MustParsePrefix("fd00::/8")},
		ExcludePorts: []int{22}}
	v4 := p.Rules(IPv4)
	lines := make([]string, len(v4))
	for i, r := range v4 {
		lines[i] = strings.Join(r, " ")
		require.Contains(t, lines[i], "--comment "+DefaultTag+":", "every rule is tagged")
	}
	require.Len(t, lines, 6)
	require.Contains(t, lines[0], "-A FENCEPOST_CAPTURE -m owner --uid-owner 1337 -j RETURN", "the sidecar's uid passes first")
	require.Contains(t, lines[1], "-d 127.0.0.0/8 -j RETURN")
	require.Contains(t, lines[2], "-d 10.1.2.3/32 -j RETURN")
	require.Contains(t, lines[3], "--dports 22 -j RETURN")
	require.Contains(t, lines[4], "-A FENCEPOST_CAPTURE -p tcp -j REDIRECT --to-ports 7483", "all TCP by default")
	require.Contains(t, lines[5], "-A OUTPUT -p tcp -j FENCEPOST_CAPTURE")

	v6 := strings.Join(flat(p.Rules(IPv6)), "\n")
	require.Contains(t, v6, "-d ::1/128 -j RETURN")
	require.Contains(t, v6, "-d fd00::/8 -j RETURN")
	require.NotContains(t, v6, "10.1.2.3", "an IPv4 exclusion is not given to ip6tables")
}

func TestUDPRules(t *testing.T) {
	require.Empty(t, Plan{ListenPort: 7483}.UDPRules(IPv4), "no UDP ports: UDP left alone")
	p := Plan{ListenPort: 7483, BlockUDPPorts: []int{443}, WorkerUID: 2000,
		ExcludeCIDRs: []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")}}
	lines := flat(p.UDPRules(IPv4))
	require.Len(t, lines, 5)
	require.Contains(t, lines[0], "--uid-owner 1337 -j RETURN")
	require.Contains(t, lines[1], "-d 127.0.0.0/8 -j RETURN")
	require.Contains(t, lines[2], "-d 10.9.0.0/16 -j RETURN")
	require.Contains(t, lines[3], "-A FENCEPOST_CAPTURE -p udp -m multiport --dports 443 -j REJECT")
	require.Contains(t, lines[4], "-A OUTPUT -p udp -m owner --uid-owner 2000 -j FENCEPOST_CAPTURE")
	for _, l := range lines {
		require.Contains(t, l, "--comment "+DefaultTag+":")
	}
	require.ErrorContains(t, Plan{ListenPort: 7483, BlockUDPPorts: []int{0}}.WithDefaults().Validate(), "1-65535")
}

func TestRulesPortListAndWorkerUID(t *testing.T) {
	ports := make([]int, 17)
	for i := range ports {
		ports[i] = 1000 + i
	}
	p := Plan{ListenPort: 7483, Ports: ports, WorkerUID: 2000}
	all := strings.Join(flat(p.Rules(IPv4)), "\n")
	require.Equal(t, 2, strings.Count(all, "REDIRECT"), "17 ports need two multiport rules (15 each at most)")
	require.Contains(t, all, "--dports 1000,1001,1002,1003,1004,1005,1006,1007,1008,1009,1010,1011,1012,1013,1014 -j REDIRECT")
	require.Contains(t, all, "-A OUTPUT -p tcp -m owner --uid-owner 2000 -j FENCEPOST_CAPTURE", "a worker uid limits the jump")
	require.Contains(t, all, "--uid-owner 1337 -j RETURN", "the default sidecar uid")
}

func TestPlanValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		p    Plan
		want string
	}{
		"no port":           {Plan{}, "listen port"},
		"port range":        {Plan{ListenPort: 7483, Ports: []int{70000}}, "1-65535"},
		"captured+excluded": {Plan{ListenPort: 7483, Ports: []int{80}, ExcludePorts: []int{80}}, "both captured and excluded"},
		"worker is sidecar": {Plan{ListenPort: 7483, WorkerUID: 1337}, "sidecar's uid"},
		"long chain":        {Plan{ListenPort: 7483, Chain: strings.Repeat("X", 29)}, "28 characters"},
		"tag with space":    {Plan{ListenPort: 7483, Tag: "a b"}, "without spaces"},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.p.WithDefaults().Validate()
			require.ErrorIs(t, err, ErrPlan)
			require.ErrorContains(t, err, tc.want)
		})
	}
	require.NoError(t, Plan{ListenPort: 7483}.WithDefaults().Validate())
}

func flat(rules [][]string) []string {
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = strings.Join(r, " ")
	}
	return out
}
