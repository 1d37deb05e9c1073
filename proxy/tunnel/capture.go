package tunnel

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/proxy/origdst"
	"github.com/fencepost/fencepost/proxy/reply"
	"github.com/fencepost/fencepost/proxy/request"
)

// Captured connections: fencepost capture's nat rules redirect the
// worker's outbound TCP to the transparent listener, and each connection
// accepted there is served as if the worker had sent it through the
// proxy. Its original destination is recovered (package proxy/origdst)
// and its first bytes decide:
//
//   - a TLS ClientHello: its server name (SNI; the destination's IP
//     without one) decides as a CONNECT to it would — intercepted
//     (intercept.hosts): a fenced connection, every request inside through
//     the request path; in connect.allow: a blind tunnel, only while the
//     lease is current; otherwise closed, as such a CONNECT is refused;
//   - an HTTP/1.x request: a fenced connection whose requests name their
//     host in the Host header, each through the request path (stamped,
//     blocked, journaled as a proxied request is);
//   - the HTTP/2 preface: closed (the sidecar cannot fence HTTP/2);
//   - anything else, or silence (a protocol whose server speaks first):
//     capture.other_tcp decides.

// OtherTCP is the policy for captured connections that are neither TLS
// nor HTTP/1.x (capture.other_tcp).
type OtherTCP string

// The other_tcp policies.
const (
	// OtherAllow passes them to their destination, lease or not.
	OtherAllow OtherTCP = "allow"
	// OtherBlockWithoutLease passes them only while the lease is current,
	// and cuts them when it ends, as a blind CONNECT tunnel.
	OtherBlockWithoutLease OtherTCP = "block_without_lease"
	// OtherBlock closes them.
	OtherBlock OtherTCP = "block"
)

// Valid reports whether o is one of the policies.
func (o OtherTCP) Valid() bool {
	return o == OtherAllow || o == OtherBlockWithoutLease || o == OtherBlock
}

// firstBytesWait is how long a captured connection may stay silent before
// it counts as a protocol whose server speaks first (SMTP, SSH, MySQL).
// HTTP and TLS clients send at once, so a second is generous for them
// and short for a server-first client, which waits once per connection.
const firstBytesWait = time.Second

// maxRecord is a TLS record's largest size with its header: a ClientHello
// in one record is peeked whole to read its server name.
const maxRecord = 5 + 1<<14

// ServeCapture serves the transparent listener ln until it is closed:
// each accepted connection is served on its own goroutine, which Wait
// waits for.
func (tn *Tunnels) ServeCapture(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		tn.running.Add(1)
		go func() {
			defer tn.running.Done()
			tn.serveCaptured(c)
		}()
	}
}

func (tn *Tunnels) serveCaptured(c net.Conn) {
	closer := &tunnelCloser{c: c}
	defer closer.Close()
	if !tn.fenced.Track(closer) {
		return
	}
	defer tn.fenced.Untrack(closer)
	dst, err := origdst.Of(c)
	if err != nil {
		tn.capturedRefused(c.RemoteAddr().String(), "", "no original destination: "+err.Error())
		return
	}
	host, port := dst.Addr().String(), strconv.Itoa(int(dst.Port()))
	if dst.Addr().Is6() {
		host = "[" + host + "]"
	}
	if e := tn.req.RefuseSelfTarget(host, port); e != nil {
		tn.capturedRefused(dst.String(), "", e.Detail)
		return
	}
	info := &tunnelInfo{host: host, port: port, captured: true}
	_ = c.SetReadDeadline(time.Now().Add(firstBytesWait))
	br := bufio.NewReaderSize(c, maxRecord)
	kind := sniff(br)
	_ = c.SetDeadline(time.Now().Add(tn.cfg.HandshakeTimeout))
	switch kind {
	case kindTLS:
		if sni := serverName(br); sni != "" {
			info.host = strings.ToLower(sni)
		}
		bare := strings.Trim(info.host, "[]")
		if tn.ca != nil && tn.ca.Intercepts(bare) {
			tn.serveSniffed(c, br, kind, info)
			return
		}
		hp := net.JoinHostPort(bare, port)
		if !tn.allow[hp] {
			tn.tunnelRefused(info, kind, "TLS to a host neither intercepted nor in connect.allow, refused as a CONNECT to it would be: add it to intercept.hosts to fence it, or to connect.allow for an unfenced tunnel")
			return
		}
		tn.captureBlind(c, br, hp, dst.String(), true)
	case kindHTTP:
		tn.serveSniffed(c, br, kind, info)
	case kindHTTP2:
		tn.tunnelRefused(info, kind, "HTTP/2 cannot be fenced")
	default:
		hp := dst.String()
		switch tn.cfg.OtherTCP {
		case OtherAllow:
			tn.captureBlind(c, br, hp, hp, false)
		case OtherBlock:
			tn.tunnelRefused(info, kind, "neither TLS nor HTTP/1.1, and capture.other_tcp is block")
		default:
			tn.captureBlind(c, br, hp, hp, true)
		}
	}
}

// captureBlind pipes a captured connection to dial, under the lease when
// leased (as a blind CONNECT tunnel: only while the lease is current, cut
// when it ends), or unconditionally (other_tcp: allow).
func (tn *Tunnels) captureBlind(c net.Conn, br *bufio.Reader, hp, dial string, leased bool) {
	var t *tunnel
	untrack := func() {}
	if leased {
		var blocked *reply.Reply
		var err error
		if t, untrack, blocked, err = tn.openBlind("", hp, dial); blocked != nil || err != nil {
			why := "cannot reach it"
			if blocked != nil {
				why = blocked.Detail
			}
			tn.capturedRefused(hp, "", why)
			return
		}
	} else {
		up, err := net.DialTimeout("tcp", dial, tn.cfg.DialTimeout)
		if err != nil {
			tn.capturedRefused(hp, "", err.Error())
			return
		}
		tn.req.Count(request.DecisionForwarded)
		tn.tunnels.WithLabelValues(tunnelBlind).Inc()
		t = &tunnel{up: up}
	}
	defer untrack()
	defer t.Close()
	if !t.attach(c) {
		return
	}
	_ = c.SetDeadline(time.Time{})
	t.pipe(&peekedConn{Conn: c, r: br})
}

// capturedRefused logs and counts a captured connection closed before its
// first bytes were judged.
func (tn *Tunnels) capturedRefused(target, kind, why string) {
	tn.req.Count(request.DecisionRejected)
	tn.tunnels.WithLabelValues(tunnelClosed).Inc()
	if ce := tn.log.Check(zap.InfoLevel, "captured connection closed"); ce != nil {
		ce.Write(zap.String("target", target), zap.String("reason", why))
	}
}

// enterCaptured checks a plain-HTTP request of a captured connection: an
// origin-form target (what a client that believes it talks to the server
// sends) and a Host header, which names the request's authority.
func (ti *tunnelInfo) enterCaptured(ctx *fasthttp.RequestCtx) *reply.Reply {
	uri := ctx.Request.Header.RequestURI()
	if len(uri) == 0 || uri[0] != '/' {
		return &reply.Reply{Code: reply.CodeBadRequest, Title: "bad request target",
			Detail: "a captured request must have an origin-form target (/path), got " + reply.Quote(string(uri))}
	}
	host := ctx.Request.Header.Host()
	if ti.lastHost != nil && bytes.Equal(host, ti.lastHost) {
		return nil
	}
	h, p, err := request.SplitAuthority(string(host))
	if err != nil {
		return &reply.Reply{Code: reply.CodeBadRequest, Title: "missing or bad Host",
			Detail: "a captured request must name its host in the Host header: " + err.Error()}
	}
	if p == "" {
		p = ti.port
	}
	ti.lastHost, ti.lastAuth = append(ti.lastHost[:0], host...), net.JoinHostPort(strings.Trim(h, "[]"), p)
	return nil
}

// entryOf is how a request of the connection enters the request path: a
// tunnel's authority, or for plain HTTP captured, the request's Host with
// the original destination's port when it names none (enterCaptured,
// which runs first, made it).
func (ti *tunnelInfo) entryOf(ctx *fasthttp.RequestCtx) request.Entry {
	if ti.captured && !ti.tls {
		return request.Entry{Authority: ti.lastAuth, Task: ti.task}
	}
	return ti.entry()
}

// serverName returns the SNI of the ClientHello at the start of br, or ""
// when it has none or cannot be read. It runs crypto/tls's own parser on
// a copy of the peeked record and stops the handshake once the hello is
// parsed; nothing is consumed from br.
func serverName(br *bufio.Reader) string {
	h, err := br.Peek(5)
	if err != nil {
		return ""
	}
	rec, _ := br.Peek(5 + (int(h[3])<<8 | int(h[4]))) // short: parse what came
	var sni string
	stop := errors.New("hello read")
	_ = tls.Server(&helloConn{r: bytes.NewReader(rec)}, &tls.Config{
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			sni = hello.ServerName
			return nil, stop
		},
	}).Handshake()
	return sni
}

// helloConn feeds a peeked ClientHello to crypto/tls and swallows what it
// writes (the alert after the handshake is stopped).
type helloConn struct {
	net.Conn // nil: only the methods below are called
	r        io.Reader
}

func (h *helloConn) Read(p []byte) (int, error)       { return h.r.Read(p) }
func (h *helloConn) Write(p []byte) (int, error)      { return len(p), nil }
func (h *helloConn) Close() error                     { return nil }
func (h *helloConn) SetDeadline(time.Time) error      { return nil }
func (h *helloConn) SetReadDeadline(time.Time) error  { return nil }
func (h *helloConn) SetWriteDeadline(time.Time) error { return nil }
func (h *helloConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (h *helloConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
