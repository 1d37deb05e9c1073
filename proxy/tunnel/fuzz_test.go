package tunnel

import (
	"bufio"
	"bytes"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/proxy/request"
)

// FuzzTunnelEntry feeds arbitrary bytes to the check a request inside a
// fenced tunnel passes before it enters the request path (package
// request fuzzes the path itself with the tunnel's Entry): whatever the
// request says, what it hands on is in origin form, with a Host that
// names the CONNECT target (its port or none), and a CONNECT inside a
// tunnel never passes.
func FuzzTunnelEntry(f *testing.F) {
	for _, s := range []string{
		"POST /x HTTP/1.1\r\nHost: up.example\r\nContent-Length: 1\r\n\r\nx",
		"POST /x HTTP/1.1\r\nHost: up.example:443\r\n\r\n",
		"GET /r?q HTTP/1.1\r\nHost: other.example\r\n\r\n",
		"POST http://up.example/x HTTP/1.1\r\nHost: up.example\r\n\r\n",
		"POST https://evil.example/x HTTP/1.1\r\nHost: up.example\r\n\r\n",
		"POST HTTPS://UP.EXAMPLE:443?q HTTP/1.1\r\nHost: up.example\r\n\r\n",
		"PUT x HTTP/1.1\r\nHost: up.example\r\n\r\n",
		"CONNECT up.example:443 HTTP/1.1\r\nHost: up.example\r\n\r\n",
		"DELETE /a/../b HTTP/1.1\r\nHost: UP.EXAMPLE\r\n\r\n",
		"POST /x HTTP/1.1\r\nHost: up.example:8443\r\n\r\n",
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	tn := &Tunnels{}
	f.Fuzz(func(t *testing.T, raw []byte, overTLS bool) {
		info := &tunnelInfo{host: "up.example", port: "443", tls: overTLS}
		var ctx fasthttp.RequestCtx
		ctx.Init2(&tunnelConn{info: info}, nil, false)
		ctx.Request.Header.DisableNormalizing()
		if err := ctx.Request.Read(bufio.NewReader(bytes.NewReader(raw))); err != nil {
			return
		}
		if e := tn.enterTunnel(&ctx); e != nil {
			return
		}
		if ctx.IsConnect() {
			t.Fatal("a CONNECT inside a tunnel entered the request path")
		}
		if uri := ctx.Request.Header.RequestURI(); len(uri) == 0 || uri[0] != '/' {
			t.Fatalf("request target %q handed on is not origin-form", uri)
		}
		h, p, err := request.SplitAuthority(string(ctx.Request.Header.Host()))
		if err != nil || h != info.host || (p != "" && p != info.port) {
			t.Fatalf("Host %q handed on does not name the CONNECT target", ctx.Request.Header.Host())
		}
		if in := info.entry(); in.Authority != "up.example:443" || in.TLS != overTLS {
			t.Fatalf("entry %+v does not name the tunnel", in)
		}
	})
}
