package config

import (
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/fencepost/fencepost/proxy"
	"github.com/fencepost/fencepost/proxy/capture"
	"github.com/fencepost/fencepost/proxy/cluster"
)

// Capture configures transparent capture (DESIGN.md, "Closing the
// bypass"): the sidecar's transparent listener (listen, other_tcp) and the
// nat rules fencepost capture installs to send the worker's outbound TCP
// there (the other keys). Both read the same section, so the rules and the
// listener agree on the port.
type Capture struct {
	// Listen is the transparent listener; empty: off.
	Listen string `yaml:"listen" doc:"transparent listener for captured connections, IPv4 loopback (e.g. 127.0.0.1:7483; [::1] at the same port is added); empty: off"`
	// OtherTCP is the policy for captured TCP that is neither TLS nor HTTP.
	OtherTCP string `yaml:"other_tcp" doc:"captured TCP that is neither TLS nor HTTP/1.1: allow, block_without_lease or block"`
	// Ports lists the destination ports captured; empty: all TCP.
	Ports []string `yaml:"ports" doc:"fencepost capture: destination ports redirected (comma-separated; empty: all TCP)"`
	// ExcludePorts lists destination ports never captured.
	ExcludePorts []string `yaml:"exclude_ports" doc:"fencepost capture: destination ports never redirected (comma-separated)"`
	// ExcludeCIDRs lists destinations never captured; the cluster's
	// endpoints and loopback are always excluded.
	ExcludeCIDRs []string `yaml:"exclude_cidrs" doc:"fencepost capture: destination CIDRs or IPs never redirected (comma-separated; cluster endpoints and loopback always are)"`
	// BlockUDPPorts lists UDP ports refused to captured uids (QUIC).
	BlockUDPPorts []string `yaml:"block_udp_ports" doc:"fencepost capture: UDP destination ports refused to captured uids, so QUIC falls back to captured TCP (comma-separated; empty: UDP untouched)"`
	// SidecarUID is the uid the sidecar runs as: never captured.
	SidecarUID int `yaml:"sidecar_uid" doc:"fencepost capture: uid the sidecar runs as; its own connections are never redirected"`
	// WorkerUID, when set, limits capture to that uid.
	WorkerUID int `yaml:"worker_uid" doc:"fencepost capture: capture only this uid's connections (0: every uid but sidecar_uid); fencepost run --capture: the child's uid when set"`
	// Backend is the iptables backend.
	Backend string `yaml:"backend" doc:"fencepost capture: iptables backend: auto (detect), nft or legacy"`
}

// defaultCapture returns the capture defaults, taken from the packages
// that own them.
func defaultCapture() Capture {
	return Capture{OtherTCP: string(proxy.DefaultOtherTCP), SidecarUID: capture.DefaultSidecarUID, Backend: string(capture.Auto),
		BlockUDPPorts: []string{strconv.Itoa(capture.DefaultBlockUDPPort)}}
}

// validate checks the section; the capture command also requires listen
// (needListen).
func (c Capture) validate(p *problems, needListen bool) {
	if c.Listen == "" && needListen {
		p.invalid("capture.listen", "must be set to the sidecar's transparent listener (e.g. %s), the port the rules redirect to", proxy.DefaultCaptureAddr)
	}
	if c.Listen != "" {
		checkLoopbackAddr(p, "capture.listen", c.Listen)
		if h, _, err := net.SplitHostPort(c.Listen); err == nil {
			if ip := net.ParseIP(h); ip == nil || ip.To4() == nil {
				p.invalid("capture.listen", "must be an IPv4 loopback address (the [::1] twin is added), got %q", c.Listen)
			}
		}
	}
	if !proxy.OtherTCP(c.OtherTCP).Valid() {
		p.invalid("capture.other_tcp", "must be %s, %s or %s (got %q)", proxy.OtherAllow, proxy.OtherBlockWithoutLease, proxy.OtherBlock, c.OtherTCP)
	}
	capturedPorts, _ := parsePorts(p, "capture.ports", c.Ports)
	excluded, _ := parsePorts(p, "capture.exclude_ports", c.ExcludePorts)
	for _, port := range capturedPorts {
		for _, x := range excluded {
			if port == x {
				p.invalid("capture.exclude_ports", "port %d is also in capture.ports", port)
			}
		}
	}
	parseCIDRs(p, "capture.exclude_cidrs", c.ExcludeCIDRs)
	parsePorts(p, "capture.block_udp_ports", c.BlockUDPPorts)
	if c.SidecarUID < 0 {
		p.invalid("capture.sidecar_uid", "must be >= 0 (got %d)", c.SidecarUID)
	}
	if c.WorkerUID < 0 || c.WorkerUID != 0 && c.WorkerUID == c.SidecarUID {
		p.invalid("capture.worker_uid", "must be >= 0 and differ from capture.sidecar_uid (got %d)", c.WorkerUID)
	}
	switch capture.Backend(c.Backend) {
	case capture.Auto, capture.NFT, capture.Legacy:
	default:
		p.invalid("capture.backend", "must be auto, nft or legacy (got %q)", c.Backend)
	}
}

// Plan returns the rules' plan; the cluster's endpoints are added by the
// caller, which resolves their names. Call it on a validated config.
func (c Capture) Plan() capture.Plan {
	var p problems
	ports, _ := parsePorts(&p, "", c.Ports)
	excl, _ := parsePorts(&p, "", c.ExcludePorts)
	udp, _ := parsePorts(&p, "", c.BlockUDPPorts)
	_, port, _ := net.SplitHostPort(c.Listen)
	lp, _ := strconv.Atoi(port)
	return capture.Plan{ListenPort: lp, SidecarUID: c.SidecarUID, WorkerUID: c.WorkerUID,
		Ports: ports, ExcludePorts: excl, ExcludeCIDRs: parseCIDRs(&p, "", c.ExcludeCIDRs), BlockUDPPorts: udp}
}

func parsePorts(p *problems, key string, list []string) ([]int, bool) {
	var out []int
	ok := true
	for i, s := range list {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 65535 {
			p.invalid(indexKey(key, i), "must be a port 1-65535 (got %q)", s)
			ok = false
			continue
		}
		out = append(out, n)
	}
	return out, ok
}

// parseCIDRs takes CIDRs and bare IPs (a /32 or /128).
func parseCIDRs(p *problems, key string, list []string) []netip.Prefix {
	var out []netip.Prefix
	for i, s := range list {
		s = strings.TrimSpace(s)
		if pf, err := netip.ParsePrefix(s); err == nil {
			out = append(out, pf.Masked())
			continue
		}
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p.invalid(indexKey(key, i), "must be a CIDR (10.0.0.0/8) or an IP (got %q)", s)
	}
	return out
}

// captureView is the sidecar configuration as fencepost capture reads it:
// the same file, environment and flags, but only the capture section and
// the cluster's endpoints are checked (the capture command runs beside a
// running sidecar, or before it, and needs nothing else of it).
type captureView struct {
	*Sidecar
	install bool
}

func (v captureView) Validate() error {
	var p problems
	if v.install && len(v.Endpoints()) == 0 {
		p.invalid("cluster", "must list the cluster's endpoints (host:port), or clusters set them: they are excluded from capture")
	}
	if _, err := v.Shards(); err != nil {
		p.invalid("clusters", "%s", strings.TrimPrefix(err.Error(), cluster.ErrShards.Error()+": "))
	}
	for i, ep := range v.Cluster {
		checkEndpoint(&p, indexKey("cluster", i), ep)
	}
	v.Capture.validate(&p, v.install)
	return p.err()
}

func (v captureView) CheckRuntime() error { return nil }

// LoadCapture loads the sidecar configuration for fencepost capture from
// the same layers as Load. install (installing rules, not removing or
// checking them) also requires capture.listen and cluster.
func LoadCapture(src Source, install bool) (*Sidecar, error) {
	s := DefaultSidecar()
	var p problems
	if err := layers(RoleSidecar, s, src, &p); err != nil {
		return nil, err
	}
	if _, err := finish(captureView{Sidecar: s, install: install}, &p); err != nil {
		return nil, err
	}
	return s, nil
}
