package request

import (
	"crypto/tls"
	"fmt"
	"net"
	"sort"
	"strings"

	"github.com/fencepost/fencepost/fence/pki"
)

// originTable maps the hosts the sidecar originates TLS for to their TLS
// configuration. Keys are lower-case "host" or "host:port".
type originTable map[string]*tls.Config

func newOriginTable(origins []TLSOrigin) (originTable, error) {
	t := make(originTable, len(origins))
	for i, o := range origins {
		host := strings.ToLower(o.Host)
		name := o.ServerName
		if name == "" {
			name = host
			if h, _, err := net.SplitHostPort(host); err == nil {
				name = h
			}
		}
		cfg := &tls.Config{ServerName: name, MinVersion: tls.VersionTLS12}
		if o.CAFile != "" {
			pool, err := pki.LoadPool(o.CAFile)
			if err != nil {
				return nil, fmt.Errorf("%w: tls.originate[%d].caFile: %v", ErrInvalidConfig, i, err)
			}
			cfg.RootCAs = pool
		}
		t[host] = cfg
	}
	return t, nil
}

// lookup returns the TLS config for a request to host (and its explicit
// port, "" when the URL named none), or nil when the host is plain HTTP.
func (t originTable) lookup(host, port string) *tls.Config {
	if len(t) == 0 {
		return nil
	}
	if port != "" {
		if c := t[net.JoinHostPort(host, port)]; c != nil {
			return c
		}
	}
	return t[host]
}

// forAddr returns the TLS config for a dial address host:port, as
// fasthttp's per-host clients see it.
func (t originTable) forAddr(addr string) *tls.Config {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return t[strings.ToLower(addr)]
	}
	host = strings.ToLower(host)
	if c := t[net.JoinHostPort(host, port)]; c != nil {
		return c
	}
	return t[host]
}

// portHint explains a failed plain-HTTP request to a host that
// tls.originate lists with another port: the sidecar spoke plain HTTP to
// a port the list does not name, which a TLS server answers with garbage.
func (t originTable) portHint(tgt target, tlsUsed bool) string {
	if tlsUsed || len(t) == 0 {
		return ""
	}
	var listed []string
	for k := range t {
		if h, _, err := net.SplitHostPort(k); err == nil && h == tgt.host {
			listed = append(listed, k)
		}
	}
	if len(listed) == 0 {
		return ""
	}
	sort.Strings(listed)
	return fmt.Sprintf(" (sent as plain HTTP to %s: tls.originate lists %s; list %s too if that port speaks TLS)",
		tgt.hostPort, strings.Join(listed, ", "), tgt.hostPort)
}

// httpsHint is the fix for an https:// URL sent in absolute form, naming
// its host and port.
func httpsHint(uri []byte) string {
	rest := string(uri[len("https://"):])
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = rest[i+1:]
	}
	host, port, err := SplitAuthority(rest)
	if err != nil {
		return "https:// cannot be fenced in absolute form: set HTTPS_PROXY (a CONNECT tunnel) and list the host in intercept.hosts"
	}
	if port == "" {
		port = "443"
	}
	hp := net.JoinHostPort(strings.Trim(host, "[]"), port)
	return "https:// cannot be fenced in absolute form: set HTTPS_PROXY (a CONNECT tunnel) and list " + strings.Trim(host, "[]") +
		" in intercept.hosts, or call http://" + hp + " with " + hp + " in tls.originate (the sidecar then speaks TLS to port " + port + ")"
}
