package tunnel

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/proxy/conns"
	"github.com/fencepost/fencepost/proxy/reply"
	"github.com/fencepost/fencepost/proxy/request"
)

// Fenced tunnels: a CONNECT whose target is intercepted, or which is
// not allow-listed and not to a TLS port, is answered 200 and its first
// bytes decide what it carries. A TLS ClientHello to an intercepted host
// is completed with a leaf from the sidecar's CA (package proxy/mitm);
// an HTTP/1.x request line is read as is (Node's fetch tunnels even
// http:// URLs). Either way the tunnel's worker side is served by the
// inner server (Tunnels.inner), whose handler checks each request against
// the CONNECT (enterTunnel) and hands it to the request path's Serve with
// the tunnel's Entry:
// every request inside a tunnel is classified, checked, stamped,
// journaled or blocked by the same code as a proxied one, and its block
// (409 problem+json) reaches the worker inside the tunnel. Anything else (garbage, the HTTP/2
// preface, TLS to a host that is not intercepted, nothing in time) is
// closed and logged.

// tunnelInfo is what each request in a fenced tunnel inherits from its
// CONNECT.
type tunnelInfo struct {
	host string // lower-case, IPv6 in brackets, as splitAuthority returns it
	port string
	tls  bool   // intercepted TLS: upstream is verified TLS too
	task string // the task the CONNECT's proxy user name selected, or ""
	// captured: a connection of the transparent listener (capture.go),
	// not a CONNECT. Plain HTTP on it names its host in each request's
	// Host header (port defaulting to the original destination's).
	captured bool
	// lastHost and lastAuth cache the last captured request's Host header
	// and the authority made of it: a keep-alive connection names the same
	// host request after request. The inner server serves one connection's
	// requests one at a time, so no lock is needed.
	lastHost []byte
	lastAuth string
}

// tunnelConn is a fenced tunnel's worker side, as the inner server serves it.
type tunnelConn struct {
	conns.LingerConn
	info *tunnelInfo
}

// fencedTunnel reports whether a CONNECT to host:port is served as a
// fenced tunnel (every request inside goes through the pipeline).
func (tn *Tunnels) fencedTunnel(host, port, hp string) bool {
	if tn.ca != nil && tn.ca.Intercepts(strings.Trim(host, "[]")) {
		return true
	}
	return !tn.allow[hp] && port != "443" && !tn.req.Originates(host, port)
}

// openFencedTunnel answers the CONNECT and serves the tunnel after the
// handler returns.
func (tn *Tunnels) openFencedTunnel(ctx *fasthttp.RequestCtx, host, port string) {
	task, err := request.TaskOf(&ctx.Request.Header)
	if err != nil {
		tn.req.Refuse(ctx, &reply.Reply{Code: reply.CodeBadRequest, Title: "bad task selection", Detail: err.Error()})
		return
	}
	info := &tunnelInfo{host: host, port: port, task: task}
	tn.req.Count(request.DecisionForwarded)
	tn.running.Add(1)
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) {
		defer tn.running.Done()
		tn.serveFencedTunnel(c, info)
	})
}

// tunnelCloser closes the socket under a hijacked connection, whose own
// Close fasthttp ignores, so a read blocked on it wakes up. It closes at
// most once, and the tunnel's goroutine closes it before returning, so
// Shutdown never touches a connection fasthttp has already released.
type tunnelCloser struct {
	mu   sync.Mutex
	c    net.Conn
	done bool
}

func (t *tunnelCloser) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return nil
	}
	t.done = true
	if u, ok := t.c.(interface{ UnsafeConn() net.Conn }); ok {
		if uc := u.UnsafeConn(); uc != nil {
			_ = uc.Close()
		}
	}
	return t.c.Close()
}

func (tn *Tunnels) serveFencedTunnel(c net.Conn, info *tunnelInfo) {
	closer := &tunnelCloser{c: c}
	defer closer.Close()
	if !tn.fenced.Track(closer) {
		return
	}
	defer tn.fenced.Untrack(closer)
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		return
	}
	deadline := time.Now().Add(tn.cfg.HandshakeTimeout)
	_ = c.SetDeadline(deadline)
	br := bufio.NewReaderSize(c, sniffSize)
	tn.serveSniffed(c, br, sniff(br), info)
}

// serveSniffed serves c, whose first bytes were read through br and
// judged kind, as a fenced connection: TLS to an intercepted host is
// completed with the sidecar's CA, HTTP/1.x is read as is, and the
// requests go to the inner server; anything else is closed. A fenced
// tunnel and a captured connection (capture.go) both end here.
func (tn *Tunnels) serveSniffed(c net.Conn, br *bufio.Reader, kind tunnelKind, info *tunnelInfo) {
	var inner net.Conn = &peekedConn{Conn: c, r: br}
	if kind == kindTLS {
		if tn.ca == nil || !tn.ca.Intercepts(strings.Trim(info.host, "[]")) {
			tn.tunnelRefused(info, kind, "TLS to a host that is not intercepted: add it to intercept.hosts, or to connect.allow for an unfenced tunnel")
			return
		}
		tc := tls.Server(inner, tn.ca.ServerConfig(info.host))
		if err := tc.Handshake(); err != nil {
			tn.tunnelRefused(info, kind, "TLS handshake: "+err.Error())
			return
		}
		br = bufio.NewReaderSize(tc, sniffSize)
		if kind = sniff(br); kind != kindHTTP {
			tn.tunnelRefused(info, kind, "not HTTP/1.1 inside TLS (HTTP/2 and other protocols cannot be fenced)")
			return
		}
		inner, info.tls = &peekedConn{Conn: tc, r: br}, true
	} else if kind != kindHTTP {
		tn.tunnelRefused(info, kind, "neither a TLS ClientHello nor an HTTP/1.1 request")
		return
	}
	_ = c.SetDeadline(time.Time{}) // the tunnel server sets its own
	if info.tls {
		tn.tunnels.WithLabelValues(tunnelIntercepted).Inc()
	} else {
		tn.tunnels.WithLabelValues(tunnelHTTP).Inc()
	}
	if ce := tn.log.Check(zap.DebugLevel, "tunnel fenced"); ce != nil {
		ce.Write(zap.String("target", net.JoinHostPort(strings.Trim(info.host, "[]"), info.port)), zap.Bool("tls", info.tls))
	}
	_ = tn.inner.ServeConn(&tunnelConn{LingerConn: conns.LingerConn{Conn: inner}, info: info})
}

func (tn *Tunnels) tunnelRefused(info *tunnelInfo, kind tunnelKind, why string) {
	tn.req.Count(request.DecisionRejected)
	tn.tunnels.WithLabelValues(tunnelClosed).Inc()
	if ce := tn.log.Check(zap.InfoLevel, "tunnel closed"); ce != nil {
		ce.Write(zap.String("target", net.JoinHostPort(strings.Trim(info.host, "[]"), info.port)),
			zap.Stringer("first_bytes", kind), zap.String("reason", why))
	}
}

// handleTunneled serves one request inside a fenced tunnel.
func (tn *Tunnels) handleTunneled(ctx *fasthttp.RequestCtx) {
	if e := tn.enterTunnel(ctx); e != nil {
		tn.req.Refuse(ctx, e)
		ctx.SetConnectionClose()
		return
	}
	tn.req.Serve(ctx, tunnelOf(ctx).entryOf(ctx))
}

// expectTunneled is expectProxy for a request inside a tunnel.
func (tn *Tunnels) expectTunneled(ctx *fasthttp.RequestCtx) int {
	if e := tn.enterTunnel(ctx); e != nil {
		tn.req.Refuse(ctx, e)
		return reply.StatusOf(e.Code)
	}
	return tn.req.Expect(ctx, tunnelOf(ctx).entryOf(ctx))
}

// tunnelOf returns the fenced tunnel a request arrived in, or nil.
func tunnelOf(ctx *fasthttp.RequestCtx) *tunnelInfo {
	if tc, ok := ctx.Conn().(*tunnelConn); ok {
		return tc.info
	}
	return nil
}

// entry is how the tunnel's requests enter the pipeline.
func (ti *tunnelInfo) entry() request.Entry {
	return request.Entry{Authority: net.JoinHostPort(strings.Trim(ti.host, "[]"), ti.port), TLS: ti.tls, Task: ti.task}
}

// enterTunnel checks a request inside a tunnel against its CONNECT
// before the pipeline parses it: the Host header (and an absolute-form
// authority, which it turns into the origin form the pipeline takes for a
// tunnel) must name the CONNECT target, port included when given, so
// rules are never evaluated for one host while the bytes go to another
// (421 otherwise). It is idempotent: the 100-continue hook and the
// handler both run it.
func (tn *Tunnels) enterTunnel(ctx *fasthttp.RequestCtx) *reply.Reply {
	ti := tunnelOf(ctx)
	if ti == nil {
		return &reply.Reply{Code: reply.CodeInternal, Title: "not a tunnel", Detail: "internal: request without its tunnel"}
	}
	if ctx.IsConnect() {
		return &reply.Reply{Code: reply.CodeBadRequest, Title: "CONNECT inside a tunnel", Detail: "a tunnel carries requests to its CONNECT target only"}
	}
	if ti.captured && !ti.tls {
		return ti.enterCaptured(ctx)
	}
	uri := ctx.Request.Header.RequestURI()
	if len(uri) == 0 || uri[0] != '/' {
		rest, ok := request.CutSchemeFold(uri)
		if !ok {
			return &reply.Reply{Code: reply.CodeBadRequest, Title: "bad request target",
				Detail: "inside a CONNECT tunnel send origin-form targets (/path), got " + reply.Quote(string(uri))}
		}
		end := bytes.IndexAny(rest, "/?#")
		if end < 0 {
			end = len(rest)
		}
		if e := ti.checkAuthority(rest[:end], "request target"); e != nil {
			return e
		}
		path := string(rest[end:])
		if path == "" || path[0] != '/' {
			path = "/" + path
		}
		ctx.Request.SetRequestURI(path)
	}
	host := ctx.Request.Header.Host()
	if len(host) == 0 {
		return &reply.Reply{Code: reply.CodeBadRequest, Title: "missing Host", Detail: "a request inside a tunnel must name its host"}
	}
	return ti.checkAuthority(host, "Host header")
}

// checkAuthority accepts a with the tunnel's host and its port or none.
func (ti *tunnelInfo) checkAuthority(a []byte, what string) *reply.Reply {
	h, p, err := request.SplitAuthority(string(a))
	if err == nil && h == ti.host && (p == "" || p == ti.port) {
		return nil
	}
	return &reply.Reply{Code: reply.CodeHostMismatch, Title: "host does not match the tunnel",
		Detail: "the " + what + " " + reply.Quote(string(a)) + " does not name the CONNECT target " +
			reply.Quote(net.JoinHostPort(strings.Trim(ti.host, "[]"), ti.port)) + ": a tunnel carries requests to its CONNECT target only"}
}

// refuseConnect answers a CONNECT the sidecar can neither fence nor
// tunnel, saying why in the reason phrase too: most clients show only
// the status line of a failed CONNECT.
func (tn *Tunnels) refuseConnect(ctx *fasthttp.RequestCtx, host, port, hp string) {
	plain := "http://" + strings.Trim(host, "[]")
	if port != "443" {
		plain += ":" + port
	}
	tn.req.Refuse(ctx, &reply.Reply{Code: reply.CodeConnectFenced, Title: "CONNECT to a fenced host",
		Detail: "the sidecar cannot stamp or block writes inside a TLS tunnel to " + hp +
			" it does not intercept: list the host in intercept.hosts (the sidecar then reads every request with its own CA), or call " +
			plain + " with " + hp + " in tls.originate (the sidecar speaks TLS upstream), or add " + hp + " to connect.allow for an unfenced tunnel"})
	ctx.Response.Header.SetStatusMessage([]byte("Forbidden by fencepost: TLS to " + hp + " is not intercepted (intercept.hosts) or allowed (connect.allow)"))
}
