package nemesis

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
)

// Firewall cuts real loopback traffic between processes with iptables. Each
// process runs under its own group id (netfault.ProcConfig.Gid); a cut
// drops, in the OUTPUT chain (every loopback packet passes it), the
// packets a group's sockets send to the other side's listening ports, plus
// packets of orphaned sockets (a closed connection the kernel still
// retransmits, owned by no process) to those ports, which would otherwise
// leak through the partition. Dropping one direction of a TCP connection
// stalls it both ways. Every rule carries the firewall's tag as a comment
// and matches only this run's ports; Heal and Close remove exactly the
// rules carrying the tag.
type Firewall struct {
	tag string
	mu  sync.Mutex
	// cuts maps a cut's name to its rules (iptables argument lists after
	// "-A OUTPUT").
	cuts map[string][][]string
}

// Endpoint is one side of a cut: a process group and the ports it listens
// on.
type Endpoint struct {
	Gid   uint32
	Ports []int
}

// FirewallAvailable reports why partitions cannot run here, or "" when
// they can: they need root and iptables with the owner match.
func FirewallAvailable() string {
	if os.Getuid() != 0 {
		return "partitions need root (iptables, and a group id per process); not root"
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		return "partitions need iptables, which is not installed (test/run.sh installs it as root)"
	}
	return ""
}

// NewFirewall returns a firewall whose rules are tagged with tag.
func NewFirewall(tag string) *Firewall {
	return &Firewall{tag: tag, cuts: map[string][][]string{}}
}

// Cut drops traffic between the groups of a and the groups of b (both
// directions), under name.
func (f *Firewall) Cut(name string, a, b []Endpoint) error {
	var rules [][]string
	for _, pair := range [][2][]Endpoint{{a, b}, {b, a}} {
		from, to := pair[0], pair[1]
		var ports []int
		for _, e := range to {
			ports = append(ports, e.Ports...)
		}
		for _, chunk := range chunks(ports, 15) { // multiport takes at most 15
			list := joinInts(chunk)
			for _, e := range from {
				rules = append(rules, []string{"-p", "tcp", "-m", "owner", "--gid-owner", strconv.Itoa(int(e.Gid)),
					"-m", "multiport", "--dports", list})
			}
			rules = append(rules, []string{"-p", "tcp", "-m", "owner", "!", "--socket-exists",
				"-m", "multiport", "--dports", list})
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range rules {
		if err := f.run(append([]string{"-I", "OUTPUT"}, f.tagged(r)...)...); err != nil {
			return err
		}
	}
	f.cuts[name] = append(f.cuts[name], rules...)
	return nil
}

// Heal removes the rules of cut name.
func (f *Firewall) Heal(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var first error
	for _, r := range f.cuts[name] {
		if err := f.run(append([]string{"-D", "OUTPUT"}, f.tagged(r)...)...); err != nil && first == nil {
			first = err
		}
	}
	delete(f.cuts, name)
	return first
}

// Close removes every rule carrying the tag, whatever cut made it (also
// rules left by a Heal that failed).
func (f *Firewall) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cuts = map[string][][]string{}
	out, err := exec.Command("iptables", "-w", "-S", "OUTPUT").Output()
	if err != nil {
		return fmt.Errorf("iptables -S OUTPUT: %w", err)
	}
	var first error
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(line, "-A OUTPUT ") || !strings.Contains(line, f.tag) {
			continue
		}
		args := append([]string{"-D", "OUTPUT"}, strings.Fields(strings.TrimPrefix(line, "-A OUTPUT "))...)
		for i := range args {
			args[i] = strings.Trim(args[i], `"`)
		}
		if err := f.run(args...); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (f *Firewall) tagged(rule []string) []string {
	return append(append([]string(nil), rule...), "-m", "comment", "--comment", f.tag, "-j", "DROP")
}

func (f *Firewall) run(args ...string) error {
	out, err := exec.Command("iptables", append([]string{"-w"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func chunks(xs []int, n int) [][]int {
	var out [][]int
	for len(xs) > n {
		out = append(out, xs[:n])
		xs = xs[n:]
	}
	if len(xs) > 0 {
		out = append(out, xs)
	}
	return out
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}
