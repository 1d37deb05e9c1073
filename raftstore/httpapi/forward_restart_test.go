package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/raftstore/httpapi"
	"github.com/fencepost/fencepost/raftstore/httpapi/httpapitest"
)

// TestForwardSurvivesLeaderRestart: a follower's pooled keep-alive
// connections to a leader process that restarted on the same address are
// dead; the forward must go through on a fresh connection instead of
// answering 502 unknown_outcome (found by the benchmark harness after a
// leader kill and restart).
func TestForwardSurvivesLeaderRestart(t *testing.T) {
	old, err := httpapi.New(httpapi.Config{Addr: "127.0.0.1:0", Logger: zaptest.NewLogger(t)}, httpapitest.New())
	require.NoError(t, err)
	require.NoError(t, old.Start())
	addr := old.Addr()

	follower := httpapitest.New()
	follower.SetFollower(true, addr)
	base := "http://" + startServer(t, follower).Addr()
	// Several forwards in parallel leave several pooled connections.
	done := make(chan int, 4)
	for i := 0; i < 4; i++ {
		go func() {
			done <- do(t, "POST", base+api.PathSessions, []byte(`{"workerId":"w"}`)).status
		}()
	}
	for i := 0; i < 4; i++ {
		require.Equal(t, http.StatusCreated, <-done)
	}

	require.NoError(t, old.Close())
	restarted := httpapitest.New()
	startServer(t, restarted, func(c *httpapi.Config) { c.Addr = addr })

	for i := 0; i < 3; i++ {
		r := do(t, "POST", base+api.PathSessions, []byte(`{"workerId":"w2"}`), api.HeaderRequestID, "rid-restart")
		require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	}
	require.NotEmpty(t, restarted.CallsOf("OpenSession"))
}
