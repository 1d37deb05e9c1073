package request

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCanonicalHostReadsEveryIPv4Spelling(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1": "127.0.0.1", "127.1": "127.0.0.1", "127.0.1": "127.0.0.1", "0177.0.0.1": "127.0.0.1",
		"0x7f.0.0.1": "127.0.0.1", "0X7F.0.0.1": "127.0.0.1", "0x7f000001": "127.0.0.1", "2130706433": "127.0.0.1",
		"017700000001": "127.0.0.1", "127.0.0.1.": "127.0.0.1", "[::ffff:127.0.0.1]": "127.0.0.1",
		"::ffff:7f00:1": "127.0.0.1", "[fe80::1%eth0]": "fe80::1", "0": "0.0.0.0", "10.1": "10.0.0.1",
	} {
		c := canonicalHost(in)
		require.True(t, c.ip.IsValid(), in)
		require.Equal(t, want, c.ip.String(), in)
	}
	for _, name := range []string{"example.com", "cafe.bad", "face", "api.example.com", "1.2.3.4.5", "256.1.1.1", "1.256.1.1", "09", "0x1g", "a.b", "1.2.3.4294967296"} {
		require.False(t, canonicalHost(name).ip.IsValid(), name)
	}
	require.Equal(t, "localhost", canonicalHost("LocalHost..").name)
	require.True(t, canonicalHost("x.LOCALHOST.").local())
	require.False(t, canonicalHost("localhost.example").local())
}

func TestCanonicalPortIsANumber(t *testing.T) {
	for in, want := range map[string]uint16{"8400": 8400, "08400": 8400, "0008400": 8400, "1": 1} {
		n, ok := canonicalPort(in)
		require.True(t, ok, in)
		require.Equal(t, want, n, in)
	}
	for _, bad := range []string{"", "65536", "-1", "0x10", "a"} {
		_, ok := canonicalPort(bad)
		require.False(t, ok, bad)
	}
}

// TestGuardRefusesEveryPortOfARemoteMember: a cluster member that is not
// this machine is refused on any port and in any spelling (its raft port
// is not in the sidecar's configuration); other hosts pass.
func TestGuardRefusesEveryPortOfARemoteMember(t *testing.T) {
	forbid, err := buildForbidden([]string{"https://10.9.8.7:7400", "member-2.fence.svc:7400"}, nil)
	require.NoError(t, err)
	p := &Pipeline{forbidden: forbid}
	for _, hp := range [][2]string{{"10.9.8.7", "7401"}, {"0xa.9.8.7", "22"}, {"::ffff:10.9.8.7", "7400"}, {"168364039", "1"}, {"member-2.fence.svc.", "7401"}} {
		require.NotNil(t, p.RefuseSelfTarget(hp[0], hp[1]), "%v", hp)
	}
	for _, hp := range [][2]string{{"10.9.8.8", "7401"}, {"member-3.fence.svc", "7400"}, {"127.0.0.1", "7400"}} {
		require.Nil(t, p.RefuseSelfTarget(hp[0], hp[1]), "%v", hp)
	}
	_, err = buildForbidden(nil, []string{"127.0.0.1:0"})
	require.ErrorIs(t, err, ErrInvalidConfig)
}

// FuzzSelfTargetGuard: whatever a host is written as, when a resolver
// would read it as a loopback address the guard refuses the sidecar's
// port, and when it reads as the member's address, every port of it.
func FuzzSelfTargetGuard(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "127.1", "0x7f.1", "2130706433", "[::ffff:127.0.0.1]", "localhost.", "10.9.8.7", "0xa.9.8.7", "example.com"} {
		f.Add(s, "7481")
	}
	forbid, err := buildForbidden([]string{"10.9.8.7:7400"}, []string{"127.0.0.1:7401"})
	require.NoError(f, err)
	p := &Pipeline{forbidden: forbid, ownPorts: []uint16{7481}}
	member := netip.MustParseAddr("10.9.8.7")
	f.Fuzz(func(t *testing.T, host, port string) {
		host, port, err := SplitAuthority(host + ":" + port)
		if err != nil || port == "" {
			return
		}
		c := canonicalHost(host)
		n, _ := canonicalPort(port)
		refused := p.RefuseSelfTarget(host, port) != nil
		if c.local() && (n == 7481 || n == 7401) && !refused {
			t.Fatalf("%s:%s reads as this machine's port %d and was let through", host, port, n)
		}
		if c.ip == member && !refused {
			t.Fatalf("%s:%s reads as the member %s and was let through", host, port, member)
		}
		if !c.local() && c.ip != member && c.name != "10.9.8.7" && refused {
			t.Fatalf("%s:%s names neither this machine nor the member, yet was refused", host, port)
		}
	})
}
