package request

import (
	"net/netip"
	"strconv"
	"strings"
)

// canonHost is a target host in the one form the self-target guard
// compares: lower-case, without brackets, trailing root dots or an IPv6
// zone, and, when it is an IP address in any spelling a resolver accepts,
// that address (unmapped). The spellings matter because the guard must
// not be a text comparison: C resolvers (inet_aton, and so getaddrinfo,
// which Go's cgo resolver, curl, Python and Node use) read "127.1",
// "0177.0.0.1", "0x7f.0.0.1" and "2130706433" all as 127.0.0.1.
type canonHost struct {
	name string     // canonical text (an IP's original text when isIP)
	ip   netip.Addr // valid when the host is an IP address
}

// canonicalHost canonicalizes a host as a worker or the configuration
// wrote it.
func canonicalHost(host string) canonHost {
	h := strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	if i := strings.IndexByte(h, '%'); i >= 0 && strings.Contains(h, ":") {
		h = h[:i]
	}
	for strings.HasSuffix(h, ".") {
		h = h[:len(h)-1]
	}
	if !mayBeIP(h) {
		// A name: no parse (a failed one allocates its error), which
		// made the guard cost 4 allocations per request to a named host.
		return canonHost{name: h}
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return canonHost{name: h, ip: a.Unmap().WithZone("")}
	}
	if a, ok := parseInetAton(h); ok {
		return canonHost{name: h, ip: a}
	}
	return canonHost{name: h}
}

// mayBeIP reports whether h (lower-case) could be an address in any
// spelling netip or inet_aton reads: only digits, hex letters, "x",
// dots and colons. Any other byte makes it a name.
func mayBeIP(h string) bool {
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c == 'x' || c == '.' || c == ':') {
			return false
		}
	}
	return h != ""
}

// local reports whether the host names this machine: "localhost" or a
// name under it (RFC 6761), a loopback address or the unspecified one.
func (c canonHost) local() bool {
	if c.ip.IsValid() {
		return c.ip.IsLoopback() || c.ip.IsUnspecified()
	}
	return c.name == "localhost" || strings.HasSuffix(c.name, ".localhost")
}

// same reports whether two canonical hosts name the same place without
// DNS: equal addresses, equal names, or both this machine.
func (c canonHost) same(o canonHost) bool {
	switch {
	case c.local() && o.local():
		return true
	case c.ip.IsValid() || o.ip.IsValid():
		return c.ip == o.ip
	default:
		return c.name == o.name
	}
}

// parseInetAton reads the IPv4 spellings inet_aton accepts and netip does
// not: one to four parts, each decimal, octal (leading 0) or hex (0x), the
// last part filling the remaining bytes.
func parseInetAton(s string) (netip.Addr, bool) {
	if s == "" {
		return netip.Addr{}, false
	}
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var out uint64
	for i, part := range parts {
		v, ok := parseAtonPart(part)
		if !ok {
			return netip.Addr{}, false
		}
		if i < len(parts)-1 {
			if v > 0xff {
				return netip.Addr{}, false
			}
			out |= v << (8 * (3 - i))
			continue
		}
		if v >= 1<<(8*(5-len(parts))) {
			return netip.Addr{}, false
		}
		out |= v
	}
	return netip.AddrFrom4([4]byte{byte(out >> 24), byte(out >> 16), byte(out >> 8), byte(out)}), true
}

func parseAtonPart(p string) (uint64, bool) {
	base := 10
	switch {
	case p == "":
		return 0, false
	case strings.HasPrefix(p, "0x"):
		base, p = 16, p[2:]
		if p == "" { // glibc reads a bare "0x" as 0
			return 0, true
		}
	case len(p) > 1 && p[0] == '0':
		base, p = 8, p[1:]
	}
	v, err := strconv.ParseUint(p, base, 32)
	return v, err == nil
}

// canonicalPort reads a port as a number, so "08400" is 8400.
func canonicalPort(port string) (uint16, bool) {
	if port == "" {
		return 0, false
	}
	v, err := strconv.ParseUint(port, 10, 16)
	return uint16(v), err == nil
}
