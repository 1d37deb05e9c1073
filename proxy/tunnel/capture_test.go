package tunnel

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/proxy/reply"
)

// hello returns the first flight a TLS client sends for serverName.
func hello(t *testing.T, serverName string) []byte {
	t.Helper()
	c, s := net.Pipe()
	defer s.Close()
	go func() {
		_ = tls.Client(c, &tls.Config{ServerName: serverName, InsecureSkipVerify: true}).Handshake() //nolint:gosec // only the hello is used
		_ = c.Close()
	}()
	require.NoError(t, s.SetDeadline(time.Now().Add(5*time.Second)))
	buf := make([]byte, maxRecord)
	n, err := s.Read(buf)
	require.NoError(t, err)
	return buf[:n]
}

func TestServerNameIsReadWithoutConsuming(t *testing.T) {
	h := hello(t, "api.example.com")
	br := bufio.NewReaderSize(bytes.NewReader(h), maxRecord)
	require.Equal(t, kindTLS, sniff(br))
	require.Equal(t, "api.example.com", serverName(br))
	require.Equal(t, len(h), br.Buffered(), "nothing is consumed: the handshake still sees the whole hello")
	got, _ := br.Peek(len(h))
	require.Equal(t, h, got)
}

func TestServerNameAbsentOrTruncated(t *testing.T) {
	h := hello(t, "") // no SNI (a client dialling an IP)
	require.Empty(t, serverName(bufio.NewReaderSize(bytes.NewReader(h), maxRecord)))
	cut := hello(t, "api.example.com")[:20]
	require.Empty(t, serverName(bufio.NewReaderSize(bytes.NewReader(cut), maxRecord)), "a truncated hello names nothing")
	require.Empty(t, serverName(bufio.NewReaderSize(bytes.NewReader([]byte{0x16, 3}), maxRecord)))
}

func TestOtherTCPValid(t *testing.T) {
	for _, o := range []OtherTCP{OtherAllow, OtherBlockWithoutLease, OtherBlock} {
		require.True(t, o.Valid(), o)
	}
	require.False(t, OtherTCP("").Valid())
	require.False(t, OtherTCP("deny").Valid())
}

// TestCapturedAuthorityFollowsEachHost: a keep-alive captured connection
// may name another host in its next request; each request gets its own
// authority, the original port filling in a Host without one.
func TestCapturedAuthorityFollowsEachHost(t *testing.T) {
	ti := &tunnelInfo{host: "10.0.0.7", port: "8080", captured: true}
	for _, tc := range []struct{ host, want string }{
		{"api.example.com", "api.example.com:8080"},
		{"api.example.com", "api.example.com:8080"},
		{"other.example.com:9000", "other.example.com:9000"},
		{"[fd00::1]", "[fd00::1]:8080"},
	} {
		var ctx fasthttp.RequestCtx
		ctx.Request.SetRequestURI("/w")
		ctx.Request.Header.SetHost(tc.host)
		require.Nil(t, ti.enterCaptured(&ctx), tc.host)
		require.Equal(t, tc.want, ti.entryOf(&ctx).Authority, tc.host)
	}
	var bad fasthttp.RequestCtx
	bad.Request.SetRequestURI("http://x.example/w")
	bad.Request.Header.SetHost("x.example")
	require.Equal(t, reply.CodeBadRequest, ti.enterCaptured(&bad).Code, "absolute-form on a captured connection")
}
