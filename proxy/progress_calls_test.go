package proxy

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/proxy/workertie"
)

// TestProgressCallsMarkProgress: with worker.progress_calls the calls the
// sidecar forwards mark progress, carried by the next heartbeat (no
// extra cluster call); without it only checkpoints and marks count.
func TestProgressCallsMarkProgress(t *testing.T) {
	for _, c := range []struct {
		policy      workertie.ProgressCalls
		write, read bool // does a forwarded write / read mark progress
	}{
		{workertie.ProgressNone, false, false},
		{workertie.ProgressWrites, true, false},
		{workertie.ProgressAll, true, true},
	} {
		t.Run(string(c.policy), func(t *testing.T) {
			for _, method := range []string{"POST", "GET"} {
				fc := newFakeCluster()
				up := startUpstream(t, nil)
				cfg := baseConfig(t)
				cfg.Worker.ProgressCalls = c.policy
				s := startSidecar(t, fc, cfg)
				mustAcquire(t, s, "job")
				resp, body := doReq(t, proxyClient(t, s, "job"), method, "http://"+up.addr()+"/step", "x", nil)
				require.Equal(t, http.StatusOK, resp.StatusCode, body)
				calls := len(fc.Heartbeats())
				s.keeper.HeartbeatOnce(t.Context())
				hbs := fc.Heartbeats()
				require.Len(t, hbs, calls+1, "one heartbeat, no extra call")
				var since uint64
				for _, h := range hbs[len(hbs)-1].Leases {
					if h.TaskID == "job" {
						since = h.SinceProgressMs
					}
				}
				want := c.write && method == "POST" || c.read && method == "GET"
				require.Equal(t, want, since > 0, "%s %s: the heartbeat's sinceProgressMs is %d", c.policy, method, since)
			}
		})
	}
}
