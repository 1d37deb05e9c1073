package cluster

import (
	"fmt"
	"net"
	"strings"
)

// normalizeEndpoint turns "host:port" or "http://host:port[/]" into the
// base URL "http://host:port". The API is plain HTTP on a private network
// (sidecars talk to the cluster over loopback or a cluster network), so
// https is refused rather than silently downgraded.
func normalizeEndpoint(ep string) (string, error) {
	hostport := strings.TrimSpace(ep)
	switch {
	case strings.HasPrefix(hostport, "http://"):
		hostport = strings.TrimPrefix(hostport, "http://")
	case strings.Contains(hostport, "://"):
		return "", fmt.Errorf("%w: endpoint %q: only http:// is supported", ErrConfig, ep)
	}
	hostport = strings.TrimSuffix(hostport, "/")
	host, port, err := net.SplitHostPort(hostport)
	if err != nil || port == "" || strings.Contains(hostport, "/") {
		return "", fmt.Errorf("%w: endpoint %q: want host:port or http://host:port", ErrConfig, ep)
	}
	return "http://" + net.JoinHostPort(host, port), nil
}
