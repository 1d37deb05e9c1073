package proxy

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// rawExchange writes raw bytes to the proxy and reads one response.
func rawExchange(t *testing.T, addr, raw string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	_, err = c.Write([]byte(raw))
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err, "raw request: %q", raw)
	defer resp.Body.Close()
	var sb strings.Builder
	_, _ = bufio.NewReader(resp.Body).WriteTo(&sb)
	return resp, sb.String()
}

func TestBadInput(t *testing.T) {
	fc := newFakeCluster()
	up := startUpstream(t, nil)
	cfg := baseConfig(t)
	cfg.MaxHeaderBytes = 4096
	cfg.MaxRequestBody = 1024
	s := startSidecar(t, fc, cfg)
	mustAcquire(t, s, "t")
	u := up.addr()
	big := strings.Repeat("a", 8000)
	for _, tc := range []struct {
		name   string
		raw    string
		status int
		code   string
	}{
		{"origin-form", "POST /x HTTP/1.1\r\nHost: " + u + "\r\nContent-Length: 1\r\n\r\nx", 400, CodeNotProxyRequest},
		{"https absolute", "POST https://" + u + "/x HTTP/1.1\r\nHost: " + u + "\r\nContent-Length: 0\r\n\r\n", 400, CodeNotProxyRequest},
		{"empty host", "POST http:///x HTTP/1.1\r\nHost: \r\nContent-Length: 0\r\n\r\n", 400, ""},
		{"invalid host", "POST http://bad^host/x HTTP/1.1\r\nHost: bad^host\r\nContent-Length: 0\r\n\r\n", 400, ""},
		{"bad port", "POST http://127.0.0.1:99999/x HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 400, ""},
		{"CL+TE", "POST http://" + u + "/x HTTP/1.1\r\nHost: " + u + "\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, ""},
		{"duplicate CL", "POST http://" + u + "/x HTTP/1.1\r\nHost: " + u + "\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxy", 400, ""},
		{"bad chunk size", "POST http://" + u + "/x HTTP/1.1\r\nHost: " + u + "\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", 400, ""},
		{"LF injection", "POST http://" + u + "/x HTTP/1.1\r\nHost: " + u + "\r\nX-A: a\rX-Fencing-Token: 1\r\nContent-Length: 0\r\n\r\n", 400, ""},
		{"NUL in header", "POST http://" + u + "/x HTTP/1.1\r\nHost: " + u + "\r\nX-A: a\x00b\r\nContent-Length: 0\r\n\r\n", 400, ""},
		{"oversized header", "POST http://" + u + "/x HTTP/1.1\r\nHost: " + u + "\r\nX-Big: " + big + "\r\nContent-Length: 0\r\n\r\n", 431, CodeHeaderTooLarge},
		{"body too large", "POST http://" + u + "/x HTTP/1.1\r\nHost: " + u + "\r\nContent-Length: 5000\r\n\r\n" + strings.Repeat("b", 5000), 413, CodeTooLarge},
		{"websocket upgrade", "GET http://" + u + "/ws HTTP/1.1\r\nHost: " + u + "\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", 501, CodeUpgrade},
		{"h2c upgrade", "POST http://" + u + "/x HTTP/1.1\r\nHost: " + u + "\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\nContent-Length: 0\r\n\r\n", 501, CodeUpgrade},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := rawExchange(t, s.ProxyAddr(), tc.raw)
			require.Equal(t, tc.status, resp.StatusCode, body)
			if tc.code != "" {
				require.Contains(t, body, tc.code)
			}
		})
	}
	require.Empty(t, up.requests(), "no malformed request reached the upstream")
	// Still serving.
	resp, _ := doReq(t, proxyClient(t, s, ""), "POST", "http://"+u+"/ok", "x", nil)
	require.Equal(t, 200, resp.StatusCode)
}

func TestSlowlorisClientTimesOut(t *testing.T) {
	fc := newFakeCluster()
	cfg := baseConfig(t)
	cfg.ReadTimeout = 300 * time.Millisecond
	s := startSidecar(t, fc, cfg)
	c, err := net.Dial("tcp", s.ProxyAddr())
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write([]byte("POST http://127.0.0.1:1/x HTTP/1.1\r\nHost: 127.0.0.1:1\r\n"))
	require.NoError(t, err)
	// Dribble a byte at a time, slower than the read timeout allows.
	start := time.Now()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		buf := make([]byte, 512)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	}()
	for i := 0; i < 50; i++ {
		if _, err := c.Write([]byte("X")); err != nil {
			break
		}
		select {
		case <-closed:
			i = 50
		case <-time.After(50 * time.Millisecond):
		}
	}
	<-closed
	require.Less(t, time.Since(start), 3*time.Second, "the server drops a client that never finishes its headers")
}

func TestExpectContinueRefusedBeforeBody(t *testing.T) {
	fc := newFakeCluster()
	up := startUpstream(t, nil)
	s := startSidecar(t, fc, baseConfig(t))
	c, err := net.Dial("tcp", s.ProxyAddr())
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	_, err = c.Write([]byte("POST http://" + up.addr() + "/upload HTTP/1.1\r\nHost: " + up.addr() + "\r\nContent-Length: 1000000\r\nExpect: 100-continue\r\n\r\n"))
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	require.Equal(t, 409, resp.StatusCode, "refused without waiting for the body")
	require.Empty(t, up.requests())

	// With a lease, 100 Continue then the body goes through.
	mustAcquire(t, s, "t")
	c2, err := net.Dial("tcp", s.ProxyAddr())
	require.NoError(t, err)
	defer c2.Close()
	require.NoError(t, c2.SetDeadline(time.Now().Add(5*time.Second)))
	_, err = c2.Write([]byte("POST http://" + up.addr() + "/upload HTTP/1.1\r\nHost: " + up.addr() + "\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n"))
	require.NoError(t, err)
	br := bufio.NewReader(c2)
	line, err := br.ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, line, "100")
	_, _ = br.ReadString('\n')
	_, err = c2.Write([]byte("abc"))
	require.NoError(t, err)
	resp, err = http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "abc", up.requests()[0].Body)
}

func TestChunkedRequestReframed(t *testing.T) {
	fc := newFakeCluster()
	up := startUpstream(t, nil)
	s := startSidecar(t, fc, baseConfig(t))
	mustAcquire(t, s, "t")
	u := up.addr()
	resp, body := rawExchange(t, s.ProxyAddr(), "POST http://"+u+"/c HTTP/1.1\r\nHost: "+u+"\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nhel\r\n2\r\nlo\r\n0\r\n\r\n")
	require.Equal(t, 200, resp.StatusCode, body)
	r := up.requests()[0]
	require.Equal(t, "hello", r.Body)
	require.Equal(t, []string{"5"}, r.values("Content-Length"))
	require.Empty(t, r.values("Transfer-Encoding"))
}
