package conns

import (
	"net"
	"strings"
)

// DialTarget returns the address the sidecar dials for the upstream
// host:port a worker named. A host under the special-use domain "localhost"
// (RFC 6761, section 6.3: "dev.localhost", "fenced.localhost") is loopback by
// definition, so the sidecar dials 127.0.0.1 itself instead of asking a
// resolver that may not know such names (glibc with "files dns", Go's own).
//
// This is what makes a service on the worker's own host reachable through
// the fence: Go's net/http never sends "localhost" or a loopback IP through
// HTTP_PROXY, but it (and curl, Python and Node) does send
// "fenced.localhost". Every other address is returned unchanged.
func DialTarget(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if !isLocalhostName(host) {
		return addr
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// isLocalhostName reports whether host is "localhost" or a name under it,
// in any case and with or without the trailing root dot.
func isLocalhostName(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	return h == "localhost" || strings.HasSuffix(h, ".localhost")
}
