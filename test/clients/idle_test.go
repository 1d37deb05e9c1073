package clients

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/proxy"
)

// TestWriteAfterServerClosedIdleConnection is the agent that pauses
// between tool calls: the upstream closes idle connections at 5 s, the
// next write comes at about 6 s and must not get a 502. The sidecar's own
// pool timeout is raised far above the server's, so only the check before
// reuse can save the write.
func TestWriteAfterServerClosedIdleConnection(t *testing.T) {
	closed := make(chan time.Time, 16)
	st := startStack(t, func(c *proxy.Config) { c.UpstreamIdleTimeout = time.Hour }, func(s *fasthttp.Server) {
		s.IdleTimeout = 5 * time.Second
		s.ConnState = func(_ net.Conn, cs fasthttp.ConnState) {
			if cs == fasthttp.StateClosed {
				closed <- time.Now()
			}
		}
	})
	env := append(baseEnv(), st.env...)
	bin := goClientPath(t)
	st.acquire(t, "idle")
	url := "https://upstream.localhost:" + st.tlsUp.port() + "/w"
	r := runJSON(t, env, bin, "write", url)
	require.Equal(t, 201, r.Status, "%+v", r)
	first := time.Now()
	var at time.Time
	select {
	case at = <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("the upstream never closed the idle connection")
	}
	require.GreaterOrEqual(t, at.Sub(first), 4*time.Second, "the server, not the sidecar, closed it")
	// Write a second after the server's close, as an agent would.
	for time.Since(at) < time.Second {
		time.Sleep(50 * time.Millisecond)
	}
	r = runJSON(t, env, bin, "write", url)
	require.Equal(t, 201, r.Status, "%+v", r)
	require.Len(t, st.tlsUp.snapshot(), 2, "each write arrives exactly once")
}
