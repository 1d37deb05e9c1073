package request

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/fencepost/fencepost/proxy/reply"
)

// forbidden is one destination the sidecar never proxies to: a cluster
// member's API or raft port, or a configured one. anyPort refuses every
// port of a cluster host that is not this machine (a worker has no
// business with a member's machine, whose raft port the sidecar may not
// know).
type forbidden struct {
	host    canonHost
	port    uint16
	anyPort bool
	what    string
}

// buildForbidden canonicalizes the cluster's endpoints and the configured
// refuse_targets once, at New.
func buildForbidden(endpoints, refuse []string) ([]forbidden, error) {
	var out []forbidden
	for _, ep := range endpoints {
		h, p, ok := endpointHostPort(ep)
		port, pok := canonicalPort(p)
		if !ok || !pok {
			continue // the cluster client refuses it with a better message
		}
		c := canonicalHost(h)
		out = append(out, forbidden{host: c, port: port, anyPort: !c.local(), what: "the lease cluster (" + net.JoinHostPort(h, p) + ")"})
	}
	for i, t := range refuse {
		h, p, err := net.SplitHostPort(t)
		port, pok := canonicalPort(p)
		if err != nil || h == "" || !pok || port == 0 {
			return nil, fmt.Errorf("%w: refuse_targets[%d]: must be host:port with a non-zero port (got %q)", ErrInvalidConfig, i, t)
		}
		out = append(out, forbidden{host: canonicalHost(h), port: port, what: "a refused target (" + t + ")"})
	}
	return out, nil
}

// RefuseSelfTarget refuses to proxy to the lease cluster (its API
// endpoints, every port of a member host that is not this machine, and
// Settings.RefuseTargets such as the members' raft addresses) and to the
// sidecar's own listeners (proxy, control, metrics, on any name of this
// machine): through any of them a worker could act on other workers'
// tasks or on its own lease (give it away, fake checkpoints) with the
// sidecar's standing.
//
// Both sides are compared in canonical form (canonicalHost,
// canonicalPort), never as text, so "localhost.", "127.1", "0x7f.1",
// "[::ffff:127.0.0.1]" and port "08400" are the addresses they stand for.
// A name that merely resolves to one of them gets no further: the
// cluster's API demands a client certificate the sidecar never attaches
// to proxied requests, raft demands a member's, and the control API
// refuses a Host that is not loopback (controlGuard).
func (p *Pipeline) RefuseSelfTarget(host, port string) *reply.Reply {
	h := canonicalHost(host)
	n, ok := canonicalPort(port)
	if !ok {
		return nil // not a port: the target parser refuses it
	}
	for _, f := range p.forbidden {
		if (f.anyPort || f.port == n) && f.host.same(h) {
			return selfTargetReply(f.what)
		}
	}
	if h.local() {
		for _, own := range p.ownPorts {
			if own == n {
				return selfTargetReply("the sidecar's own port " + strconv.Itoa(int(n)))
			}
		}
	}
	return nil
}

func selfTargetReply(what string) *reply.Reply {
	return &reply.Reply{Code: reply.CodeSelfTarget, Title: "target not allowed through the sidecar",
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

// splitHostPortOrEmpty splits a target's host:port (always well formed
// after parseTarget).
func splitHostPortOrEmpty(hp string) (string, string) {
	h, p, err := net.SplitHostPort(hp)
	if err != nil {
		return "", ""
	}
	return h, p
}
