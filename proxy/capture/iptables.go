package capture

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Backend is the iptables backend rules are given to.
type Backend string

// The backends. Auto detects (Detect).
const (
	Auto   Backend = "auto"
	NFT    Backend = "nft"
	Legacy Backend = "legacy"
)

// ErrIPTables wraps a failed iptables command (its output in the message).
var ErrIPTables = errors.New("capture: iptables failed")

// Tables runs iptables for one backend.
type Tables struct {
	// Backend is NFT or Legacy (Detect resolves Auto).
	Backend Backend
	// Netns, when set, runs every command inside that named network
	// namespace (ip netns exec): fencepost run --capture and the tests
	// capture a namespace, not the host.
	Netns string
}

// Detect returns Tables for backend b, resolving Auto the way kube-proxy
// does: the backend that already holds rules wins (a host where Docker or
// kubelet chose legacy keeps legacy), else nf_tables when its command
// exists, else legacy.
func Detect(b Backend, netns string) (Tables, error) {
	t := Tables{Backend: b, Netns: netns}
	switch b {
	case NFT, Legacy:
		if _, err := exec.LookPath(t.command(IPv4)); err != nil {
			return t, fmt.Errorf("%w: %s not found (install the iptables package)", ErrIPTables, t.command(IPv4))
		}
		return t, nil
	case Auto, "":
	default:
		return t, fmt.Errorf("%w: unknown backend %q (want auto, nft or legacy)", ErrPlan, b)
	}
	nft, legacy := Tables{Backend: NFT, Netns: netns}, Tables{Backend: Legacy, Netns: netns}
	_, nftErr := exec.LookPath(nft.command(IPv4))
	_, legErr := exec.LookPath(legacy.command(IPv4))
	switch {
	case nftErr != nil && legErr != nil:
		return t, fmt.Errorf("%w: neither iptables-nft nor iptables-legacy found (install the iptables package)", ErrIPTables)
	case nftErr != nil:
		return legacy, nil
	case legErr != nil:
		return nft, nil
	}
	if legacy.ruleCount() > nft.ruleCount() {
		return legacy, nil
	}
	return nft, nil
}

// ruleCount counts the rules of the nat and filter tables, -1 when the
// backend cannot list them (no kernel support).
func (t Tables) ruleCount() int {
	n := 0
	for _, table := range []string{"nat", "filter"} {
		out, err := t.run(IPv4, "-t", table, "-S")
		if err != nil {
			return -1
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "-A ") {
				n++
			}
		}
	}
	return n
}

// command is the iptables binary for family f.
func (t Tables) command(f Family) string {
	name := "iptables"
	if f == IPv6 {
		name = "ip6tables"
	}
	return name + "-" + string(t.Backend)
}

// run runs one command in the nat table's namespace and returns its output.
func (t Tables) run(f Family, args ...string) (string, error) {
	argv := append([]string{t.command(f), "-w", "5"}, args...)
	if t.Netns != "" {
		argv = append([]string{"ip", "netns", "exec", t.Netns}, argv...)
	}
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%w: %s: %s", ErrIPTables, strings.Join(argv, " "), strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// Families returns the families to capture on this host: IPv4, and IPv6
// when the kernel has it (an IPv6 path left open would be a bypass, so it
// is captured whenever it exists).
func Families() []Family {
	if _, err := os.Stat("/proc/net/if_inet6"); err == nil {
		return []Family{IPv4, IPv6}
	}
	return []Family{IPv4}
}

// Install replaces any rules carrying p's tag with p's rules, for each
// family: running it twice leaves one set. On error it removes what it
// added, so a failed install leaves no half-built capture.
func (t Tables) Install(p Plan, families []Family) error {
	p = p.WithDefaults()
	if err := p.Validate(); err != nil {
		return err
	}
	if err := t.Remove(p, families); err != nil {
		return err
	}
	for _, f := range families {
		if err := t.install(p, f); err != nil {
			return errors.Join(err, t.Remove(p, families))
		}
	}
	return nil
}

func (t Tables) install(p Plan, f Family) error {
	for _, tr := range []struct {
		table string
		rules [][]string
	}{{tableNAT, p.Rules(f)}, {tableFilter, p.UDPRules(f)}} {
		if len(tr.rules) == 0 {
			continue
		}
		if _, err := t.run(f, "-t", tr.table, "-N", p.Chain); err != nil {
			return err
		}
		for _, r := range tr.rules {
			if _, err := t.run(f, append([]string{"-t", tr.table}, r...)...); err != nil {
				return err
			}
		}
	}
	return nil
}

// Remove deletes every rule carrying p's tag from OUTPUT and the chain
// itself, in both tables, for each family. Nothing installed is not an
// error.
func (t Tables) Remove(p Plan, families []Family) error {
	p = p.WithDefaults()
	var errs []error
	for _, f := range families {
		for _, table := range []string{tableNAT, tableFilter} {
			for _, args := range t.tagged(p, f, table, "OUTPUT") {
				args[0] = "-D"
				if _, err := t.run(f, append([]string{"-t", table}, args...)...); err != nil {
					errs = append(errs, err)
				}
			}
			if !t.chainExists(p, f, table) {
				continue
			}
			if _, err := t.run(f, "-t", table, "-F", p.Chain); err != nil {
				errs = append(errs, err)
			}
			if _, err := t.run(f, "-t", table, "-X", p.Chain); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Installed returns, for family f, the tagged rules now in OUTPUT and in
// the chain of both tables, as iptables -S prints them.
func (t Tables) Installed(p Plan, f Family) []string {
	p = p.WithDefaults()
	var out []string
	for _, table := range []string{tableNAT, tableFilter} {
		for _, chain := range []string{"OUTPUT", p.Chain} {
			for _, args := range t.tagged(p, f, table, chain) {
				out = append(out, strings.Join(args, " "))
			}
		}
	}
	return out
}

func (t Tables) chainExists(p Plan, f Family, table string) bool {
	_, err := t.run(f, "-t", table, "-S", p.Chain)
	return err == nil
}

// tagged lists chain's rules carrying p's tag, split into arguments. The
// tag's comments hold no spaces (Validate), so splitting on spaces and
// dropping quotes gives back the arguments iptables was given.
func (t Tables) tagged(p Plan, f Family, table, chain string) [][]string {
	out, err := t.run(f, "-t", table, "-S", chain)
	if err != nil {
		return nil
	}
	var rules [][]string
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "-A "+chain+" ") || !strings.Contains(line, p.Tag+":") {
			continue
		}
		args := strings.Fields(line)
		for i := range args {
			args[i] = strings.Trim(args[i], `"`)
		}
		rules = append(rules, args)
	}
	return rules
}
