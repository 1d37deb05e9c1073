package capture

import (
	"bufio"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// DefaultRunWorkerUID is the uid fencepost run --capture starts its child
// under when neither --capture-uid nor capture.worker_uid names one: a uid
// of its own, next to the sidecar's 1337, so that no other process's
// traffic is captured with the child's.
const DefaultRunWorkerUID = 1338

// ErrPrivilege reports a process that may not install capture rules or
// start a child under another uid: fencepost run --capture needs root
// with CAP_NET_ADMIN, CAP_SETUID and CAP_SETGID.
var ErrPrivilege = errors.New("capture: not privileged")

// RunPlan returns the plan of a local worker (fencepost run --capture):
// base's ports, excluded ports and CIDRs and UDP block, narrowed to uid's
// connections, with loopback captured except keep (the sidecar's own
// listeners, the cluster's endpoints, the DNS servers' TCP port), and a
// chain and tag of uid's own. Rules of their own let runs under
// different uids, and a pod-style capture on the same host, install and
// remove theirs without touching each other's; two runs under one uid
// would capture each other's child, so RunInstalled refuses the second.
func RunPlan(base Plan, uid, listenPort int, keep []netip.AddrPort) Plan {
	p := base
	p.WorkerUID, p.ListenPort = uid, listenPort
	p.Loopback = true
	p.ExcludeDests = append(append([]netip.AddrPort(nil), base.ExcludeDests...), keep...)
	p.Chain = "FPRUN_" + strconv.Itoa(uid)
	p.Tag = "fencepost-run-" + strconv.Itoa(uid)
	return p
}

// RunInstalled returns the rules a run under p's uid already has (p from
// RunPlan) for any of families: another live run of that uid, or one
// that was killed before it could remove them.
func (t Tables) RunInstalled(p Plan, families []Family) []string {
	var out []string
	for _, f := range families {
		out = append(out, t.Installed(p, f)...)
	}
	return out
}

// Nameservers returns the DNS servers listed in a resolv.conf file (none
// when it cannot be read): their TCP port 53 stays direct under a
// local worker's capture, so name lookups that fall back to TCP keep
// working (UDP 53 is never touched).
func Nameservers(path string) []netip.AddrPort {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []netip.AddrPort
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[0] != "nameserver" {
			continue
		}
		host, _, _ := strings.Cut(fields[1], "%") // a zone is not kept by iptables
		if a, err := netip.ParseAddr(host); err == nil {
			out = append(out, netip.AddrPortFrom(a.Unmap(), 53))
		}
	}
	return out
}

// CheckPrivileges reports (ErrPrivilege) why this process may not run a
// captured child: it must be root with CAP_NET_ADMIN (the rules),
// CAP_SETUID and CAP_SETGID (the child's uid). nil when it may.
func CheckPrivileges() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: needs root (it installs nat rules and starts the worker under its own uid); run it with sudo", ErrPrivilege)
	}
	eff, err := effectiveCaps()
	if err != nil {
		return fmt.Errorf("%w: cannot read this process's capabilities: %v", ErrPrivilege, err)
	}
	for _, c := range []struct {
		bit  uint
		name string
	}{{12, "CAP_NET_ADMIN"}, {7, "CAP_SETUID"}, {6, "CAP_SETGID"}} {
		if eff&(1<<c.bit) == 0 {
			return fmt.Errorf("%w: root without %s (a container needs it added, e.g. --cap-add NET_ADMIN)", ErrPrivilege, c.name)
		}
	}
	return nil
}

// effectiveCaps reads the CapEff mask of /proc/self/status.
func effectiveCaps() (uint64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, errors.New("no CapEff line in /proc/self/status")
}
