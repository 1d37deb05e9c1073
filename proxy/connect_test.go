package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

// dialConnect opens a CONNECT tunnel through the proxy as task user.
func dialConnect(t *testing.T, proxyAddr, target, user string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", proxyAddr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	raw := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n"
	if user != "" {
		r := &http.Request{Header: http.Header{}}
		r.SetBasicAuth(user, "")
		raw += "Proxy-Authorization: " + r.Header.Get("Authorization") + "\r\n"
	}
	_, err = io.WriteString(c, raw+"\r\n")
	require.NoError(t, err)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	require.NoError(t, err)
	return c, br, resp
}

func TestConnectFencedAllowedAndCut(t *testing.T) {
	up := startUpstream(t, nil)
	fc := newFakeCluster()
	cfg := baseConfig(t)
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	cfg.ConnectAllow = []string{up.addr()}
	s := startSidecar(t, fc, cfg)

	// Not allow-listed: 403 with the fix.
	_, _, resp := dialConnect(t, s.ProxyAddr(), "example.com:443", "")
	require.Equal(t, 403, resp.StatusCode)
	b, _ := io.ReadAll(resp.Body)
	p := problemOf(t, string(b))
	require.Equal(t, api.ProblemTypeBase+CodeConnectFenced, p.Type)
	require.Contains(t, p.Detail, "tls.originate")
	require.Contains(t, p.Detail, "connect.allow")

	// Allow-listed but no lease: 409.
	_, _, resp = dialConnect(t, s.ProxyAddr(), up.addr(), "")
	require.Equal(t, 409, resp.StatusCode)

	// With a lease the tunnel works.
	mustAcquire(t, s, "t")
	c, br, resp := dialConnect(t, s.ProxyAddr(), up.addr(), "t")
	require.Equal(t, 200, resp.StatusCode)
	_, err := io.WriteString(c, "GET /in-tunnel HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	inner, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	body, _ := io.ReadAll(inner.Body)
	require.Equal(t, "ok", string(body))
	requireTunnels(t, s, "blind", 1)

	// Losing the lease closes the tunnel.
	fc.Signal("t", api.SignalRevoked, lease.StatusRevoked)
	s.keeper.HeartbeatOnce(t.Context())
	_, err = br.ReadByte()
	require.Error(t, err, "tunnel closed")
	require.Equal(t, 1.0, seriesValue(t, s, "fencepost_sidecar_tunnels_cut_total"))
}
