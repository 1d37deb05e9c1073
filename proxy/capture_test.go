package proxy

import (
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCaptureListenerRefusesDirectConnections: the transparent listener
// serves only connections the capture rules redirected. A stranger that
// dials it directly (no original destination) is closed without a reply,
// and nothing is forwarded. It needs no root: no rules are involved.
func TestCaptureListenerRefusesDirectConnections(t *testing.T) {
	up := startUpstream(t, nil)
	cfg := baseConfig(t)
	cfg.Capture = Capture{Listen: "127.0.0.1:0"}
	s := startSidecar(t, newFakeCluster(), cfg)
	mustAcquire(t, s, "t1")
	port := portOf(t, s.CaptureAddr())
	addrs := []string{s.CaptureAddr()}
	if ln, err := net.Listen("tcp", "[::1]:0"); err == nil {
		_ = ln.Close()
		addrs = append(addrs, net.JoinHostPort("::1", strconv.Itoa(port))) // the IPv6 twin
	}
	for _, a := range addrs {
		c, err := net.Dial("tcp", a)
		require.NoError(t, err, a)
		require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
		_, err = io.WriteString(c, "POST /w HTTP/1.1\r\nHost: "+up.addr()+"\r\nContent-Length: 1\r\n\r\nx")
		require.NoError(t, err)
		b, err := io.ReadAll(c) // EOF, or a reset: the request was never read
		var ne net.Error
		require.False(t, errors.As(err, &ne) && ne.Timeout(), "%s: closed, not left open", a)
		require.Empty(t, b, "%s: no reply to a connection that was not redirected", a)
		_ = c.Close()
	}
	require.Empty(t, up.requests(), "nothing reached the upstream")
	requireTunnels(t, s, "closed", float64(len(addrs)))
}

func TestCaptureConfigValidated(t *testing.T) {
	for _, tc := range []struct {
		c    Capture
		want string
	}{
		{Capture{Listen: "0.0.0.0:7483"}, "capture.listen"},
		{Capture{Listen: "[::1]:7483"}, "IPv4 loopback"},
		{Capture{Listen: "127.0.0.1:7483", OtherTCP: "deny"}, "capture.other_tcp"},
	} {
		cfg := baseConfig(t)
		cfg.Capture = tc.c
		err := cfg.Validate()
		require.ErrorIs(t, err, ErrInvalidConfig)
		require.ErrorContains(t, err, tc.want)
	}
	cfg := baseConfig(t)
	cfg.Capture = Capture{Listen: DefaultCaptureAddr}
	require.NoError(t, cfg.Validate())
	require.Equal(t, DefaultOtherTCP, cfg.WithDefaults().Capture.OtherTCP)
}
