package mitm

import (
	"crypto/x509"
	"fmt"
	"net"
	"strings"
)

// hostSet is a parsed list of intercepted host patterns.
type hostSet struct {
	all      bool
	exact    map[string]bool // lower-case names and canonical IP strings
	suffixes []string        // ".example.com" for "*.example.com"
	ips      []net.IP
}

func parseHosts(hosts []string) (hostSet, error) {
	hs := hostSet{exact: make(map[string]bool)}
	for i, h := range hosts {
		h = strings.ToLower(strings.TrimSpace(h))
		switch {
		case h == "*":
			hs.all = true
		case strings.HasPrefix(h, "*."):
			if !validName(h[2:]) {
				return hostSet{}, fmt.Errorf("%w: hosts[%d]: %q", ErrInvalidHost, i, hosts[i])
			}
			hs.suffixes = append(hs.suffixes, h[1:])
		default:
			if ip := net.ParseIP(strings.Trim(h, "[]")); ip != nil {
				hs.ips = append(hs.ips, ip)
				hs.exact[ip.String()] = true
				continue
			}
			if !validName(h) {
				return hostSet{}, fmt.Errorf("%w: hosts[%d]: %q", ErrInvalidHost, i, hosts[i])
			}
			hs.exact[h] = true
		}
	}
	if !hs.all && len(hs.exact) == 0 && len(hs.suffixes) == 0 {
		return hostSet{}, fmt.Errorf("%w: the host list is empty", ErrInvalidHost)
	}
	return hs, nil
}

// validName accepts LDH host names (and '_', which some internal names
// use), 1..253 bytes, no empty labels.
func validName(h string) bool {
	if h == "" || len(h) > 253 || strings.HasPrefix(h, ".") || strings.HasSuffix(h, ".") || strings.Contains(h, "..") {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// match reports whether host (no port) is intercepted.
func (hs hostSet) match(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if ip := net.ParseIP(strings.Trim(host, "[]")); ip != nil {
		return hs.all || hs.exact[ip.String()]
	}
	if !validName(host) {
		return false
	}
	if hs.all || hs.exact[host] {
		return true
	}
	for _, s := range hs.suffixes {
		if strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

// excludedName is a DNS subtree no real host is in (RFC 6761 reserves
// .invalid): a CA that intercepts only IP literals permits just it, so it
// cannot sign any real host name.
const excludedName = "fencepost.invalid"

// constrain adds critical name constraints to a CA template: permitted
// DNS subtrees for the names, permitted single addresses for the IPs.
// A name type the list does not use is closed off entirely (RFC 5280
// leaves a type without constraints unconstrained). Nothing is added
// when every host is intercepted.
func (hs hostSet) constrain(t *x509.Certificate) {
	if hs.all {
		return
	}
	t.PermittedDNSDomainsCritical = true
	for h := range hs.exact {
		if net.ParseIP(h) == nil {
			t.PermittedDNSDomains = append(t.PermittedDNSDomains, h)
		}
	}
	t.PermittedDNSDomains = append(t.PermittedDNSDomains, hs.suffixes...)
	if len(t.PermittedDNSDomains) == 0 {
		t.PermittedDNSDomains = []string{excludedName}
	}
	for _, ip := range hs.ips {
		bits := 128
		if v4 := ip.To4(); v4 != nil {
			ip, bits = v4, 32
		}
		t.PermittedIPRanges = append(t.PermittedIPRanges, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
	}
	if len(t.PermittedIPRanges) == 0 {
		// Permitting only 0.0.0.0/32 and ::/128 (never a server's
		// address) closes IP addresses off.
		t.PermittedIPRanges = []*net.IPNet{
			{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(32, 32)},
			{IP: net.IPv6zero, Mask: net.CIDRMask(128, 128)},
		}
	}
}

// CheckHosts validates a host list as New would, without creating a CA.
func CheckHosts(hosts []string) error {
	_, err := parseHosts(hosts)
	return err
}
