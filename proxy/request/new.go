package request

import "net"

// New builds the request path over l and registers its metrics with
// s.Registerer. It owns its upstream clients (Close closes them).
func New(s Settings, l Leases) (*Pipeline, error) {
	up, err := newUpstream(s)
	if err != nil {
		return nil, err
	}
	forbid, err := buildForbidden(s.Endpoints, s.RefuseTargets)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(s.Registerer)
	if err != nil {
		return nil, err
	}
	p := &Pipeline{
		cfg: &s, keeper: l, up: up, rules: normalizeRules(append(append([]WriteRule(nil), s.WriteRules...), presetRules(s.WritePresets)...)),
		metrics: m, log: s.Logger.Named("sidecar"), forbidden: forbid,
	}
	if len(s.JournalRules) > 0 {
		p.journal = s.Journal
		for _, r := range s.JournalRules {
			p.journalRules = append(p.journalRules, WriteRule{Host: r.Host, PathPrefix: r.PathPrefix, Methods: r.Methods, Write: true})
		}
		p.journalRules = normalizeRules(p.journalRules)
	}
	return p, nil
}

// SetOwnPorts gives the request path the sidecar's bound ports, which it
// refuses as targets. It is called once, before the sidecar serves.
func (p *Pipeline) SetOwnPorts(lns []net.Listener) {
	for _, ln := range lns {
		if _, port, err := net.SplitHostPort(ln.Addr().String()); err == nil {
			if n, ok := canonicalPort(port); ok {
				p.ownPorts = append(p.ownPorts, n)
			}
		}
	}
}

// InFlight is the number of requests and response relays in progress.
func (p *Pipeline) InFlight() int64 { return p.inflight.Load() }

// Originates reports whether a request to host:port is sent over TLS
// upstream (Settings.TLSOriginate): a CONNECT there is a TLS tunnel.
func (p *Pipeline) Originates(host, port string) bool { return p.up.origins.lookup(host, port) != nil }

// Close closes every upstream connection of the shared client.
func (p *Pipeline) Close() { p.up.close() }

// Count counts one request with its decision (a Decision* constant); a
// tunnel counts its CONNECT so.
func (p *Pipeline) Count(decision string) { p.metrics.requests.WithLabelValues(decision).Inc() }
