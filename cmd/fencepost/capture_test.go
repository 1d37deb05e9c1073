package main

import (
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/test/netns"
)

func TestCaptureBadInputIsOneLineExit2(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		key  string
	}{
		"no listen":     {[]string{"--cluster", "127.0.0.1:7400"}, "capture.listen"},
		"no cluster":    {[]string{"--capture-listen", "127.0.0.1:7483"}, "cluster"},
		"not loopback":  {[]string{"--cluster", "127.0.0.1:7400", "--capture-listen", "10.0.0.1:7483"}, "capture.listen"},
		"bad port":      {[]string{"--cluster", "127.0.0.1:7400", "--capture-listen", "127.0.0.1:7483", "--capture-ports", "80,0"}, "capture.ports[1]"},
		"bad policy":    {[]string{"--check", "--capture-other-tcp", "maybe"}, "capture.other_tcp"},
		"bad cidr":      {[]string{"--remove", "--capture-exclude-cidrs", "10.0.0.0/33"}, "capture.exclude_cidrs[0]"},
		"bad backend":   {[]string{"--remove", "--capture-backend", "ebpf"}, "capture.backend"},
		"same uids":     {[]string{"--remove", "--capture-worker-uid", "1337"}, "capture.worker_uid"},
		"both modes":    {[]string{"--remove", "--check"}, "--remove and --check"},
		"stray operand": {[]string{"--remove", "now"}, "unexpected argument"},
	} {
		t.Run(name, func(t *testing.T) {
			code, _, stderr := runCLI(t, append([]string{"capture"}, tc.args...)...)
			require.Equal(t, exitUsage, code, stderr)
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			require.Len(t, lines, 1, stderr)
			require.Contains(t, lines[0], tc.key)
		})
	}
}

// TestCaptureCommandInNetns installs, checks and removes the rules of a
// namespace of the test's with the command itself.
func TestCaptureCommandInNetns(t *testing.T) {
	ns := netns.New(t, "fpcapcmd")
	var lns []net.Listener
	require.NoError(t, ns.Do(func() {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		lns = append(lns, ln)
		if ns.IPv6 { // the probe of IPv6 is redirected to ::1, same port
			ln6, err := net.Listen("tcp", net.JoinHostPort("::1", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)))
			require.NoError(t, err)
			lns = append(lns, ln6)
		}
	}))
	port := strconv.Itoa(lns[0].Addr().(*net.TCPAddr).Port)
	for _, ln := range lns {
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_ = c.Close()
			}
		}()
	}
	common := []string{"--netns", ns.Name, "--capture-listen", "127.0.0.1:" + port}
	t.Cleanup(func() { runCLI(t, append([]string{"capture", "--remove"}, common...)...) })

	code, out, stderr := runCLI(t, append([]string{"capture", "--cluster", "127.0.0.1:7400"}, common...)...)
	require.Equal(t, exitOK, code, stderr)
	require.Contains(t, out, "capture rules installed")
	save, err := exec.Command("ip", "netns", "exec", ns.Name, "iptables-save", "-t", "nat").Output()
	if err == nil {
		require.Contains(t, string(save), "fencepost-capture:redirect")
	}

	code, out, stderr = runCLI(t, append([]string{"capture", "--check"}, common...)...)
	require.Equal(t, exitOK, code, out+stderr)
	require.Contains(t, out, "ipv4: 192.0.2.1:80: redirected to the capture listener")

	for _, ln := range lns {
		require.NoError(t, ln.Close())
	}
	code, out, _ = runCLI(t, append([]string{"capture", "--check"}, common...)...)
	require.Equal(t, exitRuntime, code)
	require.Contains(t, out, "refused", "the listener down: captured connections are refused")

	for range 2 {
		code, out, stderr = runCLI(t, append([]string{"capture", "--remove"}, common...)...)
		require.Equal(t, exitOK, code, stderr)
		require.Contains(t, out, "capture rules removed")
	}
	code, out, _ = runCLI(t, append([]string{"capture", "--check"}, common...)...)
	require.Equal(t, exitRuntime, code)
	require.Contains(t, out, "no capture rules installed")
}
