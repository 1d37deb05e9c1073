package config

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// checkAddr checks a listen address: host:port with a numeric port; an empty
// host means every interface and port 0 means "any free port".
func checkAddr(p *problems, key, addr string) (host string, port int, ok bool) {
	if addr == "" {
		p.invalid(key, "must be set (host:port)")
		return "", 0, false
	}
	h, ps, err := net.SplitHostPort(addr)
	if err != nil {
		p.invalid(key, "must be host:port (got %q)", addr)
		return "", 0, false
	}
	n, err := strconv.Atoi(ps)
	if err != nil || n < 0 || n > 65535 {
		p.invalid(key, "port must be a number from 0 to 65535 (got %q)", ps)
		return "", 0, false
	}
	return h, n, true
}

// LoopbackAddr reports whether addr (host:port) can only be reached from
// this machine.
func LoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && isLoopback(host)
}

// isLoopback reports whether host can only be reached from this machine.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// isUnspecified reports whether host is empty or a wildcard address, which
// cannot be advertised to other nodes.
func isUnspecified(host string) bool {
	if host == "" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsUnspecified()
}

// checkLoopbackAddr checks a listen address that must stay on this host.
func checkLoopbackAddr(p *problems, key, addr string) {
	host, _, ok := checkAddr(p, key, addr)
	if ok && !isLoopback(host) {
		p.invalid(key, "must listen on loopback (127.0.0.1, ::1 or localhost) so only the local worker can use it (got %q)", addr)
	}
}

// checkEndpoint checks a cluster endpoint: host:port or http(s)://host[:port].
func checkEndpoint(p *problems, key, ep string) {
	if strings.Contains(ep, "://") {
		u, err := url.Parse(ep)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.invalid(key, "must be host:port or http(s)://host:port (got %q)", ep)
			return
		}
		if u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.User != nil {
			p.invalid(key, "must not carry a path, query or user info (got %q)", ep)
		}
		return
	}
	host, port, ok := checkAddr(p, key, ep)
	if !ok {
		return
	}
	if isUnspecified(host) || port == 0 {
		p.invalid(key, "must name a reachable host and a non-zero port (got %q)", ep)
	}
}

// checkName checks an identifier used in ids, file names and env names.
func checkName(p *problems, key, s string) {
	if s == "" {
		p.invalid(key, "must not be empty")
		return
	}
	if len(s) > 64 {
		p.invalid(key, "must be at most 64 bytes (got %d)", len(s))
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			p.invalid(key, "may only contain letters, digits, '-', '_' and '.' (got %q)", s)
			return
		}
	}
}

// checkPositive checks a duration that must be > 0.
func checkPositive(p *problems, key string, d Duration) {
	if d <= 0 {
		p.invalid(key, "must be > 0 (got %s)", d)
	}
}

// checkAtLeast checks a duration against a floor.
func checkAtLeast(p *problems, key string, d, floor Duration) {
	if d < floor {
		p.invalid(key, "must be >= %s (got %s)", floor, d)
	}
}

// ms formats a duration truncated to milliseconds, so derived limits such as
// 20s/3 read as 6.666s instead of 6.666666666s.
func ms(d Duration) string {
	return Duration(time.Duration(d).Truncate(time.Millisecond)).String()
}

// checkWritableDir checks that dir exists and is writable, or can be created:
// it probes the nearest existing ancestor with a temporary file, leaving
// nothing behind.
func checkWritableDir(p *problems, key, dir string) {
	if dir == "" {
		return
	}
	probe := filepath.Clean(dir)
	for {
		fi, err := os.Stat(probe)
		if err == nil {
			if !fi.IsDir() {
				p.runtime(key, "%s is not a directory", probe)
				return
			}
			break
		}
		if !errors.Is(err, os.ErrNotExist) {
			p.runtime(key, "cannot use %s: %s", dir, unwrapPathError(err))
			return
		}
		parent := filepath.Dir(probe)
		if parent == probe {
			break
		}
		probe = parent
	}
	f, err := os.CreateTemp(probe, ".fencepost-probe-*")
	if err != nil {
		p.runtime(key, "not writable: cannot create files in %s: %s", probe, unwrapPathError(err))
		return
	}
	name := f.Name()
	_ = f.Close()
	_ = os.Remove(name)
}

// checkPortFree checks that addr can be listened on now. Port 0 always can.
// It is only a hint: the port can be taken between the check and the start.
func checkPortFree(p *problems, key, addr string) {
	_, port, err := splitPort(addr)
	if err != nil || port == 0 {
		return
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		// The person reading this wants the port moved, not explained:
		// name the flag that moves it (every key has one, flagName).
		p.runtime(key, "cannot listen on %s: %s (move it with --%s)", addr, listenMsg(err), flagName(key))
		return
	}
	_ = l.Close()
}

// splitPort splits addr and parses the port.
func splitPort(addr string) (string, int, error) {
	h, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	n, err := strconv.Atoi(ps)
	return h, n, err
}

// listenMsg shortens a net.OpError to its cause ("address already in use").
func listenMsg(err error) string {
	if se, ok := errors.AsType[*os.SyscallError](err); ok {
		return se.Err.Error()
	}
	if oe, ok := errors.AsType[*net.OpError](err); ok && oe.Err != nil {
		return oe.Err.Error()
	}
	return err.Error()
}

// checkReadable checks that an optional file can be read.
func checkReadable(p *problems, key, path string) {
	if path == "" {
		return
	}
	f, err := os.Open(path)
	if err != nil {
		p.runtime(key, "cannot read %s: %s", path, unwrapPathError(err))
		return
	}
	_ = f.Close()
}

// checkPEMFile checks an optional certificate bundle: a file that does not
// exist or holds no PEM certificate is a mistake in the configuration, found
// by plain validation (exit 2) so it never waits for the process to start.
// A file that exists but cannot be read (permissions) depends on the user
// the process runs as: CheckRuntime reports that one.
func checkPEMFile(p *problems, key, path string) {
	if path == "" {
		return
	}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		p.invalid(key, "no such file: %s", path)
	case err != nil:
		// Left to CheckRuntime.
	case !x509.NewCertPool().AppendCertsFromPEM(data):
		p.invalid(key, "%s holds no PEM certificate", path)
	}
}

// quoteList renders names for messages.
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

// indexKey names element i of the list key: "join[2]".
func indexKey(key string, i int) string { return key + "[" + strconv.Itoa(i) + "]" }
