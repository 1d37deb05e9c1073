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
	for _, list := range [][]int{p.Ports, p.ExcludePorts} {
		for _, port := range list {
			if port < 1 || port > 65535 {
				bad("ports must be 1-65535 (got %d)", port)
			}
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

// Rules returns, for family f, the rules Install adds: each an iptables
// argument list for the nat table, in order (the chain's rules, then the
// jump from OUTPUT).
func (p Plan) Rules(f Family) [][]string {
	p = p.WithDefaults()
	var out [][]string
	add := func(what string, args ...string) {
		out = append(out, append(args, "-m", "comment", "--comment", p.Tag+":"+what))
	}
	chain := []string{"-A", p.Chain}
	add("sidecar-uid", append(chain, "-m", "owner", "--uid-owner", strconv.Itoa(p.SidecarUID), "-j", "RETURN")...)
	loop := "127.0.0.0/8"
	if f == IPv6 {
		loop = "::1/128"
	}
	add("loopback", append(chain, "-d", loop, "-j", "RETURN")...)
	for _, c := range p.ExcludeCIDRs {
		if c.Addr().Is4() != (f == IPv4) {
			continue
		}
		add("exclude-cidr", append(chain, "-d", c.Masked().String(), "-j", "RETURN")...)
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
	jump := []string{"-A", "OUTPUT", "-p", "tcp"}
	if p.WorkerUID > 0 {
		jump = append(jump, "-m", "owner", "--uid-owner", strconv.Itoa(p.WorkerUID))
	}
	add("jump", append(jump, "-j", p.Chain)...)
	return out
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
