package capture_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/proxy/capture"
	"github.com/fencepost/fencepost/proxy/origdst"
	"github.com/fencepost/fencepost/test/netns"
)

// TestInstallProbeRemove installs the rules in a namespace of the test's,
// with each backend present: a probe from a captured uid is redirected
// (refused while nothing listens, accepted once the listener is up, which
// then recovers the probe's original destination), a probe from the
// sidecar's uid is not, and after Remove (twice) nothing tagged is left
// and probes are no longer redirected.
func TestInstallProbeRemove(t *testing.T) {
	for _, b := range []capture.Backend{capture.NFT, capture.Legacy} {
		t.Run(string(b), func(t *testing.T) {
			ns := netns.New(t, "fpcap")
			if _, err := exec.LookPath("iptables-" + string(b)); err != nil {
				t.Skipf("iptables-%s not installed", b)
			}
			tables, err := capture.Detect(b, ns.Name)
			require.NoError(t, err)
			families := []capture.Family{capture.IPv4}
			if ns.IPv6 {
				families = append(families, capture.IPv6)
			} else {
				t.Log("IPv6 not available in the namespace: IPv4 only")
			}
			var lns []net.Listener
			require.NoError(t, ns.Do(func() {
				for _, a := range []string{"127.0.0.1:0", "[::1]:0"} {
					if a == "[::1]:0" && !ns.IPv6 {
						continue
					}
					ln, err := net.Listen("tcp", a)
					require.NoError(t, err)
					lns = append(lns, ln)
				}
			}))
			port := lns[0].Addr().(*net.TCPAddr).Port
			if len(lns) > 1 {
				// Both listeners on one port: the rules name one port.
				require.NoError(t, lns[1].Close())
				require.NoError(t, ns.Do(func() {
					ln, err := net.Listen("tcp", "[::1]:"+strconv.Itoa(port))
					require.NoError(t, err)
					lns[1] = ln
				}))
			}
			var udp net.PacketConn
			require.NoError(t, ns.Do(func() {
				var err error
				udp, err = net.ListenPacket("udp", netns.UpstreamIPv4+":0")
				require.NoError(t, err)
			}))
			defer udp.Close()
			udpPort := udp.LocalAddr().(*net.UDPAddr).Port
			plan := capture.Plan{ListenPort: port, SidecarUID: 4242, Tag: fmt.Sprintf("fpcap-test-%d", port), Chain: "FPCAP_TEST",
				BlockUDPPorts: []int{udpPort}}
			t.Cleanup(func() { _ = tables.Remove(plan, families) })
			require.NoError(t, tables.Install(plan, families))
			require.NoError(t, tables.Install(plan, families), "install is idempotent")
			for _, f := range families {
				require.Len(t, tables.Installed(plan, f), len(plan.Rules(f))+len(plan.UDPRules(f)), "one set of rules after two installs (%s)", f)
			}
			// UDP to a blocked port is refused for a captured uid (QUIC
			// falls back to TCP), and passes for the sidecar's.
			udpTo := func(uid int) error {
				c, err := capture.DialAs(context.Background(), ns.Name, uid, "udp", udp.LocalAddr().String(), time.Second)
				require.NoError(t, err)
				defer c.Close()
				require.NoError(t, c.SetDeadline(time.Now().Add(500*time.Millisecond)))
				if _, err := c.Write([]byte("quic?")); err != nil {
					return err
				}
				_, err = c.Read(make([]byte, 16)) // delivered: nobody answers (timeout)
				return err
			}
			// The send fails at once: netfilter drops a local packet
			// before it leaves and the socket reports EPERM.
			err = udpTo(0)
			require.True(t, errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ECONNREFUSED),
				"UDP to a blocked port is refused for a captured uid (got %v)", err)
			err = udpTo(plan.SidecarUID)
			var ne net.Error
			require.True(t, errors.As(err, &ne) && ne.Timeout(), "the sidecar's UDP passes (got %v)", err)
			require.NoError(t, udp.SetReadDeadline(time.Now().Add(2*time.Second)))
			n, _, err := udp.ReadFrom(make([]byte, 16))
			require.NoError(t, err)
			require.Equal(t, 5, n, "the sidecar's datagram arrived")
			probes := map[capture.Family]netip.AddrPort{capture.IPv4: capture.ProbeIPv4, capture.IPv6: capture.ProbeIPv6}
			ctx := context.Background()
			for i, f := range families {
				target := probes[f]
				accepted := make(chan netip.AddrPort, 1)
				go func(ln net.Listener) {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					defer c.Close()
					dst, err := origdst.Of(c)
					if err == nil {
						accepted <- dst
					}
				}(lns[i])
				r := tables.Probe(ctx, target, 0, 2*time.Second)
				require.Equal(t, capture.Redirected, r.Verdict, r.String())
				select {
				case dst := <-accepted:
					require.Equal(t, target, dst, "the listener recovers the original destination")
				case <-time.After(5 * time.Second):
					t.Fatal("the listener did not recover the original destination")
				}
				r = tables.Probe(ctx, target, plan.SidecarUID, 500*time.Millisecond)
				require.Equal(t, capture.NotRedirected, r.Verdict, "the sidecar's uid is excluded: %s", r)
			}
			for _, ln := range lns {
				require.NoError(t, ln.Close())
			}
			for _, f := range families {
				r := tables.Probe(ctx, probes[f], 0, 2*time.Second)
				require.Equal(t, capture.RedirectedRefused, r.Verdict, "nothing listens: refused, never passed through: %s", r)
			}
			require.NoError(t, tables.Remove(plan, families))
			require.NoError(t, tables.Remove(plan, families), "remove is idempotent")
			err = udpTo(0)
			require.True(t, errors.As(err, &ne) && ne.Timeout(), "after Remove UDP passes (got %v)", err)
			for _, f := range families {
				require.Empty(t, tables.Installed(plan, f))
				r := tables.Probe(ctx, probes[f], 0, 300*time.Millisecond)
				require.Equal(t, capture.NotRedirected, r.Verdict, r.String())
			}
		})
	}
}

// TestOriginalDestinationOfDirectConnection: a connection dialled to the
// listener itself has no original destination to recover.
func TestOriginalDestinationOfDirectConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err == nil {
			defer c.Close()
			time.Sleep(100 * time.Millisecond)
		}
	}()
	c, err := ln.Accept()
	require.NoError(t, err)
	defer c.Close()
	_, err = origdst.Of(c)
	require.ErrorIs(t, err, origdst.ErrNotRedirected)
}
