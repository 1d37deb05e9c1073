package proxy

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/api"
)

// TestTunnelsCannotReachClusterOrSidecar: with every loopback host
// intercepted, a CONNECT to the cluster or to the sidecar's control port
// is refused before any tunnel opens, and a request inside a tunnel whose
// authority is the cluster (plain HTTP or intercepted TLS) is refused by
// the pipeline's own reach check, so no way in skips it.
func TestTunnelsCannotReachClusterOrSidecar(t *testing.T) {
	fc := newFakeCluster()
	cluster := startUpstream(t, nil)
	cfg := interceptConfig(t, "")
	cfg.Endpoints = []string{"http://" + cluster.addr()}
	s := startSidecar(t, fc, cfg)
	mustAcquire(t, s, "mine")

	for _, target := range []string{cluster.addr(), s.ControlAddr(), s.ProxyAddr()} {
		req, err := http.NewRequest(http.MethodConnect, "http://"+s.ProxyAddr(), nil)
		require.NoError(t, err)
		req.Host = target
		resp, err := http.DefaultTransport.RoundTrip(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "CONNECT %s: %s", target, body)
		require.Equal(t, "false", resp.Header.Get(HeaderShouldRetry))
		require.Equal(t, api.ProblemTypeBase+CodeSelfTarget, problemOf(t, string(body)).Type, target)
	}

	pem, err := os.ReadFile(cfg.Intercept.BundleFile)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(pem))
	host, port, err := net.SplitHostPort(cluster.addr())
	require.NoError(t, err)
	for _, overTLS := range []bool{false, true} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		done := make(chan struct{})
		go func() {
			defer close(done)
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.tunnels.ServeFenced(c, host, port, "mine")
		}()
		var c net.Conn
		c, err = net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		established := "HTTP/1.1 200 Connection Established\r\n\r\n"
		buf := make([]byte, len(established))
		_, err = io.ReadFull(c, buf)
		require.NoError(t, err)
		require.Equal(t, established, string(buf))
		if overTLS {
			tc := tls.Client(c, &tls.Config{RootCAs: roots, ServerName: host})
			require.NoError(t, tc.Handshake())
			c = tc
		}
		req, err := http.NewRequest(http.MethodPost, "http://"+cluster.addr()+"/v1/tasks/other/revoke", strings.NewReader("{}"))
		require.NoError(t, err)
		require.NoError(t, req.Write(c))
		resp, err := http.ReadResponse(bufio.NewReader(c), req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "tls=%v: %s", overTLS, body)
		require.Equal(t, api.ProblemTypeBase+CodeSelfTarget, problemOf(t, string(body)).Type)
		require.NoError(t, c.Close())
		require.NoError(t, ln.Close())
		<-done
	}
	require.Empty(t, cluster.requests(), "nothing reached the cluster")
	require.Len(t, s.Leases(), 1, "the lease is still held")
}
