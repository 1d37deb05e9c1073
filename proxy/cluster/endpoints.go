package cluster

import (
	"fmt"
	"net"
	"strings"
)

// normalizeEndpoint turns "host:port" or "http(s)://host:port[/]" into a
// base URL. With secure (Config.TLS set) the base is https and an
// explicit http:// endpoint is refused, so a TLS client is never silently
// downgraded; without it https:// is refused, since there is no CA to
// verify the server with.
func normalizeEndpoint(ep string, secure bool) (string, error) {
	hostport := strings.TrimSpace(ep)
	scheme := "http://"
	if secure {
		scheme = "https://"
	}
	switch {
	case strings.HasPrefix(hostport, scheme):
		hostport = strings.TrimPrefix(hostport, scheme)
	case secure && strings.Contains(hostport, "://"):
		return "", fmt.Errorf("%w: endpoint %q: the cluster client speaks TLS; use host:port or https://host:port", ErrConfig, ep)
	case strings.Contains(hostport, "://"):
		return "", fmt.Errorf("%w: endpoint %q: https:// needs the cluster CA (ctl --ca, sidecar cluster_tls); else use http://", ErrConfig, ep)
	}
	hostport = strings.TrimSuffix(hostport, "/")
	host, port, err := net.SplitHostPort(hostport)
	if err != nil || port == "" || strings.Contains(hostport, "/") {
		return "", fmt.Errorf("%w: endpoint %q: want host:port or %shost:port", ErrConfig, ep, scheme)
	}
	return scheme + net.JoinHostPort(host, port), nil
}
