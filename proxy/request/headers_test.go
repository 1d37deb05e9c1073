package request

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence"
)

// The by-length tables must drop exactly the listed names, in any case.
func TestDropNamesByLength(t *testing.T) {
	var s reqScan
	// Spelled out, not taken from hopByHop and dropNames, so that a name
	// lost from either list fails here.
	for _, n := range []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"} {
		for _, v := range []string{n, strings.ToLower(n), strings.ToUpper(n)} {
			require.True(t, isHopByHop([]byte(v)), v)
			require.True(t, s.dropOnForward([]byte(v)), v)
		}
	}
	for _, n := range []string{fence.HeaderToken, "x-fencing-anything", "Idempotency-Key", "Host", "Content-Length", "Expect", "HTTP2-Settings"} {
		for _, v := range []string{n, strings.ToLower(n), strings.ToUpper(n)} {
			require.False(t, isHopByHop([]byte(v)), v)
			require.True(t, s.dropOnForward([]byte(v)), v)
		}
	}
	for _, v := range []string{"Content-Type", "Connectio", "Connections", "X-Fencing", "User-Agent", "T", "", strings.Repeat("a", 200)} {
		require.False(t, isHopByHop([]byte(v)), v)
		require.False(t, s.dropOnForward([]byte(v)), v)
	}
	s.connTokens = [][]byte{[]byte("x-custom")}
	require.True(t, s.dropOnForward([]byte("X-Custom")))
}

// parseTarget splits the absolute-form target into host, host:port and
// the raw and normalised paths, without the user info, query or fragment.
func TestParseTargetParts(t *testing.T) {
	for _, c := range []struct{ uri, host, hostPort, raw, norm string }{
		{"http://api.example/v1/x?q=1", "api.example", "api.example:80", "/v1/x", "/v1/x"},
		{"http://API.Example:8080/a#frag", "api.example", "api.example:8080", "/a", "/a"},
		{"http://user@api.example:81/p/../q?x#y", "api.example", "api.example:81", "/p/../q", "/q"},
		{"http://api.example", "api.example", "api.example:80", "/", "/"},
		{"http://api.example?q=/x", "api.example", "api.example:80", "/", "/"},
		{"http://[::1]:9/z", "[::1]", "[::1]:9", "/z", "/z"},
	} {
		tg, e := parseTarget(newTestCtx("GET", c.uri, ""), Entry{}, nil)
		require.Nil(t, e, c.uri)
		tg.uri = nil
		require.Equal(t, target{host: c.host, hostPort: c.hostPort, rawPath: c.raw, normPath: c.norm}, tg, c.uri)
	}
}
