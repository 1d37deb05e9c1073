//go:build linux

// Package netns gives tests a network namespace of their own: created
// with ip netns add under a name unique to the test, given test addresses
// outside 127.0.0.0/8 on its loopback interface (connections to them are
// not loopback to the capture rules, so they are captured) and a default
// route (so a probe to a documentation address reaches the nat OUTPUT
// chain instead of failing with "network unreachable"), and deleted at the end of the test even when
// it fails. Go code runs inside it on a locked OS thread (Do); commands
// run inside it with Command. It is test support for the capture tests.
package netns

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// Addresses added to the namespace's lo: upstreams in the namespace listen
// there; capture redirects connections to them.
const (
	// UpstreamIPv4 is local to the namespace.
	UpstreamIPv4 = "10.77.0.1"
	// UpstreamIPv6 is local to the namespace (a ULA).
	UpstreamIPv6 = "fd77::1"
)

// NS is one test's network namespace.
type NS struct {
	// Name is the name under /run/netns.
	Name string
	// IPv6 reports whether the namespace has IPv6 (the kernel allows it).
	IPv6 bool
}

// Available returns why namespaces cannot be made here, or "".
func Available() string {
	if os.Getuid() != 0 {
		return "network namespaces need root; not root"
	}
	for _, c := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(c); err != nil {
			return c + " is not installed (test/run.sh installs iproute2 and iptables as root)"
		}
	}
	return ""
}

var seq atomic.Int64

// New creates a namespace for t (skipping t when Available says no) and
// deletes it when t ends.
func New(t testing.TB, prefix string) *NS {
	t.Helper()
	if why := Available(); why != "" {
		t.Skip(why)
	}
	ns := &NS{Name: fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), seq.Add(1))}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns.Name).Run() })
	for _, c := range [][]string{
		{"ip", "netns", "add", ns.Name},
		{"ip", "-n", ns.Name, "link", "set", "lo", "up"},
		{"ip", "-n", ns.Name, "addr", "add", UpstreamIPv4 + "/24", "dev", "lo"},
		{"ip", "-n", ns.Name, "route", "add", "default", "dev", "lo"},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(c, " "), err, out)
		}
	}
	v6 := [][]string{
		{"ip", "-n", ns.Name, "-6", "addr", "add", UpstreamIPv6 + "/64", "dev", "lo", "nodad"},
		{"ip", "-n", ns.Name, "-6", "route", "add", "default", "dev", "lo"},
	}
	ns.IPv6 = true
	for _, c := range v6 {
		if err := exec.Command(c[0], c[1:]...).Run(); err != nil {
			ns.IPv6 = false
		}
	}
	return ns
}

// Do runs fn on an OS thread that has entered the namespace. Sockets
// created by fn belong to the namespace for their whole life, whatever
// thread uses them later. The thread is never handed back to the
// scheduler (it ends with fn), because it is no longer in the test's
// namespace.
func (ns *NS) Do(fn func()) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open("/run/netns/" + ns.Name)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", ns.Name, err)
			return
		}
		fn()
		errc <- nil
	}()
	return <-errc
}

// Command returns cmd run inside the namespace, as uid when uid > 0
// (nsenter switches uid and gid after entering, with no supplementary
// groups).
func (ns *NS) Command(uid int, name string, args ...string) *exec.Cmd {
	argv := []string{"--net=/run/netns/" + ns.Name}
	if uid > 0 {
		argv = append(argv, fmt.Sprintf("--setuid=%d", uid), fmt.Sprintf("--setgid=%d", uid))
	}
	argv = append(append(argv, "--", name), args...)
	return exec.Command("nsenter", argv...)
}

// Inside reports whether this test binary is the re-run Reexec started in
// a namespace: env (the variable the caller passed to Reexec) is set.
func Inside(env string) bool { return os.Getenv(env) != "" }

// Reexec runs t's body in a namespace of its own, so that the nat rules
// and processes it sets up touch nothing of the host: it creates a
// namespace (skipping t when Available says no), re-runs this test binary
// inside it (ip netns exec) for t alone, with env set to the namespace's
// name and extra added to the environment, logs the re-run's output and
// fails t when the re-run failed. The caller returns after it; the re-run,
// where Inside(env) is true, runs the body:
//
//	if !netns.Inside(myEnv) {
//		netns.Reexec(t, "fpx", myEnv)
//		return
//	}
func Reexec(t *testing.T, prefix, env string, extra ...string) {
	t.Helper()
	ns := New(t, prefix)
	cmd := exec.Command("ip", "netns", "exec", ns.Name, os.Args[0],
		"-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.count=1", "-test.v")
	cmd.Env = append(append(os.Environ(), env+"="+ns.Name), extra...)
	out, err := cmd.CombinedOutput()
	t.Logf("inside namespace %s:\n%s", ns.Name, out)
	if err != nil {
		t.Fatalf("the test failed inside its namespace %s: %v", ns.Name, err)
	}
}
