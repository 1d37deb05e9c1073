package control

import (
	"bytes"
	"mime"
	"net"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/proxy/reply"
)

// controlGuard decides whether a control API request may be served at all.
// The control API acts with the sidecar's lease (give it away, checkpoint),
// so it must not be reachable from a web page the worker's browser tool
// opened: a cross-site form can send text/plain (CSRF), and a DNS-rebound
// name reaches loopback with its own Host. So:
//   - POST bodies must be declared application/json (a form cannot send it
//     cross-site without a CORS preflight, which is never answered);
//   - Host must name loopback (localhost, 127.0.0.0/8, ::1);
//   - an Origin header, when present, must be that same loopback origin.
//
// It answers the refusal itself and returns false.
func controlGuard(ctx *fasthttp.RequestCtx) bool {
	host := string(ctx.Host())
	if !loopbackHost(host) {
		reply.Problem(ctx, reply.CodeControlRefused, "control API is loopback only",
			"Host must be localhost, 127.0.0.0/8 or [::1], got "+reply.Quote(host), 0)
		return false
	}
	if o := ctx.Request.Header.Peek("Origin"); len(o) > 0 {
		if !bytes.EqualFold(o, []byte("http://"+host)) {
			reply.Problem(ctx, reply.CodeControlRefused, "cross-origin request refused",
				"Origin "+reply.Quote(string(o))+" is not this control API (http://"+host+")", 0)
			return false
		}
	}
	if ctx.IsPost() {
		mt, _, err := mime.ParseMediaType(string(ctx.Request.Header.ContentType()))
		if err != nil || mt != "application/json" {
			reply.Problem(ctx, reply.CodeControlNotJSON, "JSON only",
				"control requests must be sent with Content-Type: application/json", 0)
			return false
		}
	}
	return true
}

// loopbackHost reports whether a Host header (host or host:port) names
// loopback.
func loopbackHost(hostPort string) bool {
	h := hostPort
	if sh, _, err := net.SplitHostPort(hostPort); err == nil {
		h = sh
	}
	h = strings.ToLower(strings.Trim(h, "[]"))
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
