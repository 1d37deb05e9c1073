package capture

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRunPlanCapturesLoopbackButTheKeptDestinations(t *testing.T) {
	base := Plan{ExcludePorts: []int{22}, BlockUDPPorts: []int{443}}
	keep := []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:7481"), netip.MustParseAddrPort("[::1]:7481"), netip.MustParseAddrPort("127.0.0.53:53")}
	p := RunPlan(base, 4321, 40000, keep).WithDefaults()
	require.NoError(t, p.Validate())
	require.Equal(t, "FPRUN_4321", p.Chain)
	require.Equal(t, "fencepost-run-4321", p.Tag)

	v4 := strings.Join(flat(p.Rules(IPv4)), "\n")
	require.NotContains(t, v4, "127.0.0.0/8 -j RETURN", "loopback is captured for a local worker")
	require.Contains(t, v4, "-A FPRUN_4321 -d 127.0.0.1/32 -p tcp --dport 7481 -j RETURN")
	require.Contains(t, v4, "-d 127.0.0.53/32 -p tcp --dport 53 -j RETURN", "DNS over TCP stays direct")
	require.NotContains(t, v4, "::1", "an IPv6 destination is not given to iptables")
	require.Contains(t, v4, "--dports 22 -j RETURN", "the configured exclusions still apply")
	require.Contains(t, v4, "-A FPRUN_4321 -p tcp -j REDIRECT --to-ports 40000")
	require.Contains(t, v4, "-A OUTPUT -p tcp -m owner --uid-owner 4321 -j FPRUN_4321", "only the child's uid jumps to the chain")
	for _, l := range flat(p.Rules(IPv4)) {
		require.Contains(t, l, "--comment fencepost-run-4321:")
		require.NotContains(t, l, DefaultTag, "a run's rules never carry the pod capture's tag")
	}
	v6 := strings.Join(flat(p.Rules(IPv6)), "\n")
	require.Contains(t, v6, "-d ::1/128 -p tcp --dport 7481 -j RETURN")
	require.NotContains(t, strings.Join(flat(p.UDPRules(IPv4)), "\n"), "127.0.0.0/8", "UDP 443 to loopback is refused too")

	require.Empty(t, base.ExcludeDests, "RunPlan does not write into its base")
	bad := RunPlan(base, 4321, 40000, []netip.AddrPort{netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 0)}).WithDefaults()
	require.ErrorIs(t, bad.Validate(), ErrPlan)
}

func TestNameservers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resolv.conf")
	require.NoError(t, os.WriteFile(path, []byte("# comment\nsearch example.test\nnameserver 127.0.0.53\nnameserver fe80::1%eth0\nnameserver not-an-ip\noptions edns0\n"), 0o644))
	require.Equal(t, []netip.AddrPort{netip.MustParseAddrPort("127.0.0.53:53"), netip.MustParseAddrPort("[fe80::1]:53")}, Nameservers(path))
	require.Empty(t, Nameservers(filepath.Join(t.TempDir(), "missing")), "no resolv.conf: nothing to keep")
}
