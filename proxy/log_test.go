package proxy

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

// TestWritesAreLoggedWithTaskHostAndPath: an operator reading the
// sidecar's log sees which task's call went where, forwarded or blocked,
// and never its query or body.
// querySecret is the query value no log line may carry. Letters past f,
// so no port, address or hex key in a log line can contain it by chance
// (a card number's digits did, in an upstream port like 34111).
const querySecret = "zqxsecretcard"

func TestWritesAreLoggedWithTaskHostAndPath(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	fc := newFakeCluster()
	up := startUpstream(t, nil)
	cfg := baseConfig(t)
	cfg.Logger = zap.New(core)
	s := startSidecar(t, fc, cfg)
	g := mustAcquire(t, s, "job")
	c := proxyClient(t, s, "job")

	resp, body := doReq(t, c, "POST", "http://"+up.addr()+"/charge?card="+querySecret, "secret-body", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	fwd := logs.FilterMessage("write forwarded").AllUntimed()
	require.Len(t, fwd, 1, "one line per forwarded write")
	f := fwd[0].ContextMap()
	require.Equal(t, "job", f["task"])
	require.EqualValues(t, g.Lease.Epoch, f["epoch"])
	require.Equal(t, up.addr(), f["host"])
	require.Equal(t, "/charge", f["path"])
	require.EqualValues(t, 200, f["status"])
	require.NotEmpty(t, f["key"])

	resp, _ = doReq(t, c, "GET", "http://"+up.addr()+"/read", "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Len(t, logs.FilterMessage("write forwarded").AllUntimed(), 1, "reads are not logged")

	fc.Signal("job", api.SignalRevoked, lease.StatusRevoked)
	s.keeper.HeartbeatOnce(t.Context())
	resp, body = doReq(t, c, "POST", "http://"+up.addr()+"/charge?card="+querySecret, "secret-body", nil)
	require.Equal(t, http.StatusConflict, resp.StatusCode, body)
	blocked := logs.FilterMessage("request blocked").AllUntimed()
	require.Len(t, blocked, 1)
	b := blocked[0].ContextMap()
	require.Equal(t, "job", b["task"])
	require.Equal(t, up.addr(), b["host"])
	require.Equal(t, "/charge", b["path"])
	require.Equal(t, "POST", b["method"])
	for _, e := range logs.All() {
		for k, v := range e.ContextMap() {
			text := fmt.Sprint(v)
			require.NotContains(t, text, querySecret, "%s: %s logged the query", e.Message, k)
			require.NotContains(t, text, "secret-body", "%s: %s logged the body", e.Message, k)
		}
	}
}
