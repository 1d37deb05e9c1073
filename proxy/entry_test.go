package proxy

import (
	"bufio"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/proxy/request"
)

// serveEntry serves raw over an in-memory connection through the
// pipeline as a request read from inside a tunnel to authority: the shape
// a CONNECT tunnel carrying plain HTTP (or intercepted TLS) plugs in with.
func serveEntry(t *testing.T, s *Sidecar, in request.Entry, raw string) *http.Response {
	t.Helper()
	a, b := net.Pipe()
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { s.pipe.Serve(ctx, in) }, DisableHeaderNamesNormalizing: true}
	done := make(chan error, 1)
	go func() { done <- srv.ServeConn(a) }()
	go func() { _, _ = b.Write([]byte(raw)) }()
	resp, err := http.ReadResponse(bufio.NewReader(b), nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = b.Close()
		<-done
	})
	return resp
}

func TestTunnelEntryGoesThroughThePipeline(t *testing.T) {
	fc := newFakeCluster()
	up := startUpstream(t, nil)
	s := startSidecar(t, fc, baseConfig(t))
	mustAcquire(t, s, "alpha")
	mustAcquire(t, s, "beta")
	in := request.Entry{Authority: up.addr(), Task: "beta"}

	// Origin-form inside the tunnel: stamped with the tunnel's task, sent
	// to the tunnel's authority, worker fencing headers replaced.
	resp := serveEntry(t, s, in, "POST /w?q=1#frag HTTP/1.1\r\nHost: "+up.addr()+"\r\nX-Fencing-Token: 999\r\nContent-Length: 1\r\n\r\nx")
	require.Equal(t, 200, resp.StatusCode)
	got := up.requests()
	require.Len(t, got, 1)
	require.Equal(t, "/w?q=1", got[0].URI)
	require.Equal(t, []string{"102"}, got[0].values("X-Fencing-Token"))
	require.Equal(t, []string{"beta"}, got[0].values("X-Fencing-Task"))
	require.Len(t, got[0].values("Idempotency-Key"), 1)

	// The same checks as any entry: a Host that is not the tunnel's, a
	// request naming another task, a task without a lease.
	resp = serveEntry(t, s, in, "POST /w HTTP/1.1\r\nHost: elsewhere.example\r\nContent-Length: 1\r\n\r\nx")
	require.Equal(t, 400, resp.StatusCode)
	resp = serveEntry(t, s, in, "POST /w HTTP/1.1\r\nHost: "+up.addr()+"\r\n"+HeaderTaskSelect+": alpha\r\nContent-Length: 1\r\n\r\nx")
	require.Equal(t, 400, resp.StatusCode)
	resp = serveEntry(t, s, request.Entry{Authority: up.addr(), Task: "gamma"}, "POST /w HTTP/1.1\r\nHost: "+up.addr()+"\r\nContent-Length: 1\r\n\r\nx")
	require.Equal(t, 409, resp.StatusCode)
	resp = serveEntry(t, s, in, "GET http://"+up.addr()+"/abs HTTP/1.1\r\nHost: "+up.addr()+"\r\n\r\n")
	require.Equal(t, 400, resp.StatusCode, "inside a tunnel the target is origin-form")
	require.Len(t, up.requests(), 1)
}
