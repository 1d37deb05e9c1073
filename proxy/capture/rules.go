package capture

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Defaults of a Plan. They are the capture defaults everywhere: package
// config takes its defaults from here.
const (
	// DefaultChain is the dedicated nat chain.
	DefaultChain = "FENCEPOST_CAPTURE"
	// DefaultTag starts the comment of every rule.
	DefaultTag = "fencepost-capture"
	// DefaultSidecarUID is the uid the sidecar runs as and whose traffic is
	// never captured (the image's user; Istio uses 1337 the same way).
	DefaultSidecarUID = 1337
	// DefaultBlockUDPPort is the UDP port blocked by default: QUIC
	// (HTTP/3), which would otherwise leave the pod unfenced.
	DefaultBlockUDPPort = 443
)

// Family is an address family: the rules exist once per family.
type Family string

// The families, with the iptables command of each.
const (
	IPv4 Family = "ipv4"
	IPv6 Family = "ipv6"
)

// ErrPlan wraps every reason a Plan is refused.
var ErrPlan = errors.New("capture: invalid plan")

// Plan describes the rules. The zero value is not valid: ListenPort is
// required.
type Plan struct {
	// ListenPort is the transparent listener's port; captured connections
	// are redirected there.
	ListenPort int
	// SidecarUID is excluded: the sidecar's own connections pass.
	SidecarUID int
	// WorkerUID, when > 0, limits capture to that uid's connections (a
	// local worker started by fencepost run --capture under its own uid);
	// 0 captures every uid but the sidecar's, as in a pod.
	WorkerUID int
	// Ports lists the destination ports captured; empty captures all TCP.
	Ports []int
	// ExcludePorts lists destination ports never captured.
	ExcludePorts []int
	// ExcludeCIDRs are destinations never captured: the cluster's
	// endpoints and any configured networks. Each applies to its family.
	ExcludeCIDRs []netip.Prefix
	// Loopback, when set, captures loopback destinations too: on a local
	// worker's host (fencepost run --capture) the services the worker
	// writes to may listen on 127.0.0.1, and leaving loopback out would
	// leave them a bypass. ExcludeDests then names what on loopback must
	// stay direct. Unset (a pod): loopback is the pod's own containers
	// and the sidecar, never captured.
	Loopback bool
	// ExcludeDests are TCP destinations (address and port) never captured:
	// with Loopback, the sidecar's own listeners, the cluster's endpoints
	// and the DNS servers' TCP port 53. Each applies to its family.
	ExcludeDests []netip.AddrPort
	// BlockUDPPorts lists UDP destination ports refused (ICMP port
	// unreachable) for the captured uids: UDP cannot be redirected to the
	// sidecar, so QUIC (UDP 443) is closed instead and clients fall back to
	// TCP, which is captured. The same exclusions apply (sidecar uid,
	// loopback, ExcludeCIDRs). Empty: UDP is left alone.
	BlockUDPPorts []int
	// Chain names the dedicated chain. Default DefaultChain.
	Chain string
	// Tag starts every rule's comment. Default DefaultTag.
	Tag string
}

// WithDefaults returns p with Chain, Tag and SidecarUID defaulted.
func (p Plan) WithDefaults() Plan {
	if p.Chain == "" {
		p.Chain = DefaultChain
	}
	if p.Tag == "" {
		p.Tag = DefaultTag
	}
	if p.SidecarUID == 0 {
		p.SidecarUID = DefaultSidecarUID
	}
	return p
}

// Validate reports every broken rule of p (after WithDefaults), joined.
func (p Plan) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrPlan}, args...)...))
	}
	if p.ListenPort < 1 || p.ListenPort > 65535 {
		bad("listen port must be 1-65535 (got %d)", p.ListenPort)
	}
	if p.SidecarUID < 0 || p.WorkerUID < 0 {
		bad("uids must be >= 0")
	}
	if p.WorkerUID != 0 && p.WorkerUID == p.SidecarUID {
		bad("worker uid %d is the sidecar's uid: its traffic would be both captured and excluded", p.WorkerUID)
	}
	for _, list := range [][]int{p.Ports, p.ExcludePorts, p.BlockUDPPorts} {
		for _, port := range list {
			if port < 1 || port > 65535 {
				bad("ports must be 1-65535 (got %d)", port)
			}
		}
	}
	for _, d := range p.ExcludeDests {
		if !d.IsValid() || d.Port() == 0 {
			bad("excluded destination %q must be an address and a port 1-65535", d)
		}
	}
	for _, port := range p.Ports {
		if slices.Contains(p.ExcludePorts, port) {
			bad("port %d is both captured and excluded", port)
		}
	}
	if len(p.Chain) > 28 || strings.ContainsAny(p.Chain, " \t\"") {
		bad("chain %q must be at most 28 characters, without spaces or quotes", p.Chain)
	}
	if strings.ContainsAny(p.Tag, " \t\"'") || p.Tag == "" {
		bad("tag %q must be non-empty, without spaces or quotes", p.Tag)
	}
	return errors.Join(errs...)
}

// The tables the rules live in: nat for the TCP redirect, filter for the
// UDP block.
const (
	tableNAT    = "nat"
	tableFilter = "filter"
)

// Rules returns, for family f, the rules Install adds: each an iptables
// argument list for the nat table, in order (the chain's rules, then the
// jump from OUTPUT).
func (p Plan) Rules(f Family) [][]string {
	p = p.WithDefaults()
	var out [][]string
	add := p.adder(&out)
	chain := []string{"-A", p.Chain}
	p.exclusions(f, add)
	for _, d := range p.ExcludeDests {
		if a := d.Addr().Unmap(); a.Is4() == (f == IPv4) {
			add("exclude-dest", append(chain, "-d", netip.PrefixFrom(a, a.BitLen()).String(), "-p", "tcp", "--dport", strconv.Itoa(int(d.Port())), "-j", "RETURN")...)
		}
	}
	for _, group := range chunks(p.ExcludePorts) {
		add("exclude-ports", append(chain, "-p", "tcp", "-m", "multiport", "--dports", group, "-j", "RETURN")...)
	}
	redirect := []string{"-j", "REDIRECT", "--to-ports", strconv.Itoa(p.ListenPort)}
	if len(p.Ports) == 0 {
		add("redirect", append(append(chain, "-p", "tcp"), redirect...)...)
	}
	for _, group := range chunks(p.Ports) {
		add("redirect", append(append(chain, "-p", "tcp", "-m", "multiport", "--dports", group), redirect...)...)
	}
	add("jump", p.jump("tcp")...)
	return out
}

// UDPRules returns, for family f, the filter-table rules Install adds for
// BlockUDPPorts (none when it is empty), in order.
func (p Plan) UDPRules(f Family) [][]string {
	p = p.WithDefaults()
	if len(p.BlockUDPPorts) == 0 {
		return nil
	}
	var out [][]string
	add := p.adder(&out)
	p.exclusions(f, add)
	for _, group := range chunks(p.BlockUDPPorts) {
		add("block-udp", "-A", p.Chain, "-p", "udp", "-m", "multiport", "--dports", group, "-j", "REJECT")
	}
	add("jump-udp", p.jump("udp")...)
	return out
}

// adder appends one tagged rule to out.
func (p Plan) adder(out *[][]string) func(what string, args ...string) {
	return func(what string, args ...string) {
		*out = append(*out, append(args, "-m", "comment", "--comment", p.Tag+":"+what))
	}
}

// exclusions adds the RETURN rules both tables start with: the sidecar's
// uid, loopback (unless Loopback captures it) and the excluded CIDRs of
// family f.
func (p Plan) exclusions(f Family, add func(what string, args ...string)) {
	chain := []string{"-A", p.Chain}
	add("sidecar-uid", append(chain, "-m", "owner", "--uid-owner", strconv.Itoa(p.SidecarUID), "-j", "RETURN")...)
	if !p.Loopback {
		loop := "127.0.0.0/8"
		if f == IPv6 {
			loop = "::1/128"
		}
		add("loopback", append(chain, "-d", loop, "-j", "RETURN")...)
	}
	for _, c := range p.ExcludeCIDRs {
		if c.Addr().Is4() != (f == IPv4) {
			continue
		}
		add("exclude-cidr", append(chain, "-d", c.Masked().String(), "-j", "RETURN")...)
	}
}

// jump is the OUTPUT rule sending proto to the chain (one uid's only when
// WorkerUID is set).
func (p Plan) jump(proto string) []string {
	jump := []string{"-A", "OUTPUT", "-p", proto}
	if p.WorkerUID > 0 {
		jump = append(jump, "-m", "owner", "--uid-owner", strconv.Itoa(p.WorkerUID))
	}
	return append(jump, "-j", p.Chain)
}

// chunks joins ports into comma lists of at most 15, multiport's limit.
func chunks(ports []int) []string {
	var out []string
	for i := 0; i < len(ports); i += 15 {
		end := min(i+15, len(ports))
		s := make([]string, 0, end-i)
		for _, p := range ports[i:end] {
			s = append(s, strconv.Itoa(p))
		}
		out = append(out, strings.Join(s, ","))
	}
	return out
}
