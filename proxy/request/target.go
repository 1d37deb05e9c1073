package request

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/proxy/proxytrace"
	"github.com/fencepost/fencepost/proxy/reply"
)

// Entry says how a request reached the pipeline. The zero value is an
// absolute-form request on the proxy port (HTTP_PROXY). A request read
// from inside a CONNECT tunnel (plain HTTP, or TLS the sidecar
// terminated) carries the tunnel's authority: its request target is
// origin-form ("/path?query") and its Host must name the same host.
type Entry struct {
	// Authority is the host:port the CONNECT named; "" for absolute form.
	Authority string
	// TLS says the upstream speaks TLS (the worker's TLS was intercepted).
	TLS bool
	// Task is the Task the CONNECT's proxy user name selected ("" none);
	// a request inside the tunnel may not name another.
	Task string
}

// target is the parsed destination of a request, as classification and
// forwarding need it.
type target struct {
	host     string      // lower-case host name without port
	hostPort string      // lower-case host:port (port defaulted)
	rawPath  string      // path as the worker sent it
	normPath string      // path after percent-decoding and dot-segment removal
	tls      *tls.Config // non-nil: the sidecar speaks TLS upstream
	// uri is the upstream request URI without the scheme:
	// authority + path + query, no fragment. It aliases the request's
	// buffer and is valid while the handler runs.
	uri []byte
}

// errNotProxy explains what the proxy port accepts.
const errNotProxy = "this port is an HTTP forward proxy: send absolute-form requests (set HTTP_PROXY=http://127.0.0.1:PORT)"

// parseTarget is the one place a request target is parsed and its host
// validated: absolute-form http:// URLs on the proxy port, origin-form
// paths inside a tunnel.
func parseTarget(ctx *fasthttp.RequestCtx, in Entry, origins originTable) (target, *reply.Reply) {
	raw := ctx.Request.Header.RequestURI()
	var authority, both string
	var end, pathEnd int
	if in.Authority == "" {
		if !hasPrefixFold(raw, "http://") {
			detail := errNotProxy
			if hasPrefixFold(raw, "https://") {
				detail = httpsHint(raw)
			}
			return target{}, &reply.Reply{Code: reply.CodeNotProxyRequest, Title: "not a proxy request", Detail: detail}
		}
		rest := raw[len("http://"):]
		end = bytes.IndexAny(rest, "/?#")
		if end < 0 {
			end = len(rest)
		}
		// The authority and the raw path are adjacent in the request line:
		// one string holds both, so a request costs one allocation for them.
		pathEnd = end
		if p := rest[end:]; len(p) > 0 && p[0] == '/' {
			pathEnd = len(rest)
			if q := bytes.IndexAny(p, "?#"); q >= 0 {
				pathEnd = end + q
			}
		}
		both = string(rest[:pathEnd])
		authority = both[:end]
		if i := strings.LastIndexByte(authority, '@'); i >= 0 {
			authority = authority[i+1:] // user info goes upstream as Authorization
		}
		uri := rest
		if i := bytes.IndexByte(uri, '#'); i >= 0 {
			uri = uri[:i]
		}
		t, e := finishTarget(ctx, authority, both, end, pathEnd, origins, false)
		t.uri = uri
		return t, e
	}
	if len(raw) == 0 || raw[0] != '/' {
		return target{}, &reply.Reply{Code: reply.CodeBadRequest, Title: "bad request target",
			Detail: "a request inside a tunnel must name an origin-form path, got " + reply.Quote(string(raw))}
	}
	host, _, err := SplitAuthority(string(ctx.Request.Header.Host()))
	tunnelHost, _, terr := SplitAuthority(in.Authority)
	if err != nil || terr != nil || host != tunnelHost {
		return target{}, &reply.Reply{Code: reply.CodeBadRequest, Title: "Host does not match the tunnel",
			Detail: fmt.Sprintf("Host %s must name the CONNECT authority %s", reply.Quote(string(ctx.Request.Header.Host())), reply.Quote(in.Authority))}
	}
	path := raw
	if i := bytes.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	both = in.Authority + string(path)
	t, e := finishTarget(ctx, in.Authority, both, len(in.Authority), len(both), origins, in.TLS)
	if e == nil {
		uri := raw
		if i := bytes.IndexByte(uri, '#'); i >= 0 {
			uri = uri[:i]
		}
		t.uri = append([]byte(t.hostPort), uri...)
	}
	return t, e
}

// finishTarget validates the authority and fills in the rest of a
// target; both holds the authority (up to end) and the raw path (up to
// pathEnd).
func finishTarget(ctx *fasthttp.RequestCtx, authority, both string, end, pathEnd int, origins originTable, forceTLS bool) (target, *reply.Reply) {
	host, port, err := SplitAuthority(authority)
	if err != nil {
		return target{}, &reply.Reply{Code: reply.CodeBadRequest, Title: "invalid host", Detail: err.Error()}
	}
	t := target{host: host, rawPath: "/"}
	if pathEnd > end {
		t.rawPath = both[end:pathEnd]
	}
	// The normalised path is usually the raw one: share its string.
	if np := ctx.Request.URI().Path(); string(np) == t.rawPath {
		t.normPath = t.rawPath
	} else {
		t.normPath = string(np)
	}
	t.tls = origins.lookup(host, port)
	if forceTLS && t.tls == nil {
		t.tls = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	}
	if port == "" {
		port = "80"
		if t.tls != nil {
			port = "443"
		}
	}
	if len(authority) == len(host)+1+len(port) && authority[:len(host)] == host && authority[len(host)] == ':' && authority[len(host)+1:] == port {
		t.hostPort = authority // already host:port, lower-case: no second string
	} else {
		t.hostPort = net.JoinHostPort(host, port)
	}
	return t, nil
}

// setUpstream points req at the target: scheme, authority, path and
// query, and the Host header the worker addressed.
func (t *target) setUpstream(req *fasthttp.Request, ctx *fasthttp.RequestCtx, in Entry) {
	scheme := "http://"
	if t.tls != nil {
		scheme = "https://"
	}
	req.SetRequestURI(scheme + string(t.uri))
	req.UseHostHeader = true
	if in.Authority == "" {
		req.Header.SetHostBytes(ctx.Request.URI().Host())
	} else {
		req.Header.SetHostBytes(ctx.Request.Header.Host())
	}
}

// SplitAuthority validates host[:port] and lower-cases the host.
func SplitAuthority(a string) (host, port string, err error) {
	if a == "" {
		return "", "", errors.New("missing host")
	}
	host = a
	if strings.HasPrefix(a, "[") {
		i := strings.IndexByte(a, ']')
		if i < 0 {
			return "", "", fmt.Errorf("bad IPv6 literal %q", a)
		}
		host = a[:i+1]
		if ip := net.ParseIP(a[1:i]); ip == nil {
			return "", "", fmt.Errorf("bad IPv6 literal %q", a)
		}
		if rest := a[i+1:]; rest != "" {
			if rest[0] != ':' {
				return "", "", fmt.Errorf("bad authority %q", a)
			}
			port = rest[1:]
		}
	} else if i := strings.LastIndexByte(a, ':'); i >= 0 {
		host, port = a[:i], a[i+1:]
	}
	if !strings.HasPrefix(host, "[") {
		if host == "" || len(host) > 253 {
			return "", "", fmt.Errorf("bad host %q", a)
		}
		for i := 0; i < len(host); i++ {
			c := host[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
				return "", "", fmt.Errorf("bad host %q", a)
			}
		}
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '+' {
			return "", "", fmt.Errorf("bad port in %q", a)
		}
	}
	return strings.ToLower(host), port, nil
}

// CutSchemeFold strips a leading http:// or https://.
func CutSchemeFold(uri []byte) ([]byte, bool) {
	for _, p := range []string{"http://", "https://"} {
		if hasPrefixFold(uri, p) {
			return uri[len(p):], true
		}
	}
	return nil, false
}

// traceEntry names the way in for the request's span.
func (in Entry) traceEntry() proxytrace.Entry {
	switch {
	case in.Authority == "":
		return proxytrace.EntryProxy
	case in.TLS:
		return proxytrace.EntryIntercepted
	}
	return proxytrace.EntryConnect
}
