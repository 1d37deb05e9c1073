package proxy

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/proxytest"
)

// reportingCluster is the fake cluster plus the report route of a
// cluster that keeps block reports.
type reportingCluster struct {
	*proxytest.Cluster
	mu      sync.Mutex
	reports []api.BlockedReport
	tasks   []string
}

func (c *reportingCluster) ReportBlocked(_ context.Context, taskID string, r api.BlockedReport) error {
	if err := r.Check(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tasks, c.reports = append(c.tasks, taskID), append(c.reports, r)
	return nil
}

func (c *reportingCluster) sent() (tasks []string, reports []api.BlockedReport, count uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.reports {
		count += r.Count
	}
	return append([]string(nil), c.tasks...), append([]api.BlockedReport(nil), c.reports...), count
}

// TestBlockedWritesAreReportedToTheCluster: writes blocked after a
// revocation are reported for the task's history, coalesced (every block
// counted, far fewer calls than blocks), naming the first call and the
// worker's trace id from its traceparent even with tracing off; reads
// with a lease and writes with no lease ever held are not reported.
func TestBlockedWritesAreReportedToTheCluster(t *testing.T) {
	rc := &reportingCluster{Cluster: newFakeCluster()}
	s := startSidecar(t, rc, baseConfig(t))
	up := startUpstream(t, func(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(http.StatusCreated) })
	g := mustAcquire(t, s, "t1")
	client := proxyClient(t, s, "t1")
	post := func(traceID string) int {
		req, err := http.NewRequest(http.MethodPost, "http://"+up.addr()+"/v1/charge?card=secret", strings.NewReader("x"))
		require.NoError(t, err)
		req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
		resp, err := client.Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		return resp.StatusCode
	}
	require.Equal(t, http.StatusCreated, post("11111111111111111111111111111111"))

	rc.Signal("t1", api.SignalRevoked, lease.StatusRevoked)
	s.keeper.HeartbeatOnce(t.Context())
	const blocks = 20
	first := "4bf92f3577b34da6a3ce929d0e0e4736"
	for i := range blocks {
		id := first
		if i > 0 {
			id = "22222222222222222222222222222222"
		}
		require.Equal(t, http.StatusConflict, post(id), "write %d after the revocation", i)
	}
	eventually(t, func() bool { _, _, n := rc.sent(); return n == blocks }, "every block counted in a report")
	tasks, reports, _ := rc.sent()
	require.Less(t, len(reports), blocks/2, "blocks are coalesced: %+v", reports)
	for _, task := range tasks {
		require.Equal(t, "t1", task)
	}
	r := reports[0]
	require.Equal(t, api.BlockedReport{SessionID: s.keeper.SessionFor("t1"), Epoch: g.Lease.Epoch, Reason: "revoked",
		Method: "POST", URL: up.addr() + "/v1/charge", TraceID: first, Count: r.Count}, r, "the query never leaves the sidecar")
	require.Equal(t, float64(len(reports)), seriesValue(t, s, "fencepost_sidecar_block_reports_total", "sent"))

	// A task never held has nothing the cluster could attribute.
	other := proxyClient(t, s, "never-held")
	resp, err := other.Post("http://"+up.addr()+"/v1/charge", "text/plain", strings.NewReader("x"))
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.NotEqual(t, http.StatusCreated, resp.StatusCode)
	// Reports go out in the order first blocked: once a later t1 block
	// is in, a report of the other would have been too.
	require.Equal(t, http.StatusConflict, post(first))
	eventually(t, func() bool { _, _, n := rc.sent(); return n == blocks+1 }, "the later block reported")
	tasks, _, _ = rc.sent()
	require.NotContains(t, tasks, "never-held")
}
