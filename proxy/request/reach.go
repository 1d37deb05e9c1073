package request

import (
	"net"
	"net/netip"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/proxy/reply"
)

// RefuseSelfTarget refuses to proxy to the cluster's API endpoints
// (Settings.Endpoints) and to the sidecar's own listeners (proxy, control,
// metrics: ownPorts): through either a worker could act on other workers' tasks or
// on its own lease (give it away, fake checkpoints) with the sidecar's
// standing. host is lower-case, port numeric.
//
// It compares what the request names, without DNS: a cluster endpoint by
// its configured name or address, the sidecar's ports on any loopback or
// unspecified address and "localhost". A name that merely resolves to one
// of them gets no further: the cluster's API demands a client certificate
// the sidecar never attaches to proxied requests, and the control API
// refuses a Host that is not loopback (controlGuard).
func (p *Pipeline) RefuseSelfTarget(host, port string) *reply.Reply {
	for _, ep := range p.cfg.Endpoints {
		eh, ep, ok := endpointHostPort(ep)
		if ok && ep == port && (strings.EqualFold(eh, host) || sameIP(eh, host) || isLocalName(eh) && isLocalName(host)) {
			return selfTargetReply("the lease cluster's API (" + net.JoinHostPort(eh, ep) + ")")
		}
	}
	if !isLocalName(host) {
		return nil
	}
	for _, lp := range p.ownPorts {
		if lp == port {
			return selfTargetReply("the sidecar's own port " + port)
		}
	}
	return nil
}

func selfTargetReply(what string) *reply.Reply {
	return &reply.Reply{Status: fasthttp.StatusForbidden, Code: reply.CodeSelfTarget, Title: "target not allowed through the sidecar",
		Detail: "the sidecar does not proxy to " + what + ": use the control API for lease operations"}
}

// endpointHostPort splits a configured cluster endpoint ("host:port",
// optionally with an http:// or https:// scheme) into host and port.
func endpointHostPort(ep string) (host, port string, ok bool) {
	def := "80"
	if strings.HasPrefix(ep, "https://") {
		def = "443"
	}
	ep = strings.TrimPrefix(strings.TrimPrefix(ep, "https://"), "http://")
	if i := strings.IndexByte(ep, '/'); i >= 0 {
		ep = ep[:i]
	}
	h, p, err := net.SplitHostPort(ep)
	if err != nil {
		if ep == "" || strings.Contains(ep, ":") {
			return "", "", false
		}
		h, p = ep, def
	}
	return strings.ToLower(h), p, true
}

// isLocalName reports whether host names this machine: localhost, a
// loopback address or the unspecified address.
func isLocalName(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	return ip.IsLoopback() || ip.IsUnspecified()
}

// sameIP reports whether a and b are the same IP address written
// differently (::ffff:10.0.0.1 and 10.0.0.1).
func sameIP(a, b string) bool {
	x, err1 := netip.ParseAddr(strings.Trim(a, "[]"))
	y, err2 := netip.ParseAddr(strings.Trim(b, "[]"))
	return err1 == nil && err2 == nil && x.Unmap() == y.Unmap()
}

// splitHostPortOrEmpty splits a target's host:port (always well formed
// after parseTarget).
func splitHostPortOrEmpty(hp string) (string, string) {
	h, p, err := net.SplitHostPort(hp)
	if err != nil {
		return "", ""
	}
	return h, p
}
