package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/raftstore/httpapi/httpapitest"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zapcore"
)

// TestLeasesArePaged: GET /v1/leases answers at most a page (?limit=, at
// most raftstore.MaxListLimit) with next pointing at the rest, like GET
// /v1/tasks (the cluster client's Leases follows the pages: its test is
// in proxy/cluster).
func TestLeasesArePaged(t *testing.T) {
	cl := httpapitest.StartCluster(t, 1, zapcore.WarnLevel)
	base := "http://" + cl.Nodes[0].HTTP.Addr()
	var sess api.Session
	do(t, "POST", base+api.PathSessions, []byte(`{"workerId":"w"}`)).decode(t, &sess)
	const n = 25
	for i := range n {
		r := do(t, "POST", base+path(api.PathAcquire, "{id}", fmt.Sprintf("t%02d", i)),
			mustJSON(t, api.AcquireRequest{SessionID: sess.SessionID, Create: true}))
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	}
	var seen []string
	next := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, n, "bounded")
		var page api.LeaseList
		do(t, "GET", base+api.PathLeases+"?limit=10&after="+next, nil).decode(t, &page)
		require.LessOrEqual(t, len(page.Leases), 10)
		for _, l := range page.Leases {
			seen = append(seen, l.TaskID)
		}
		if page.Next == "" {
			break
		}
		next = page.Next
	}
	require.Len(t, seen, n)
	require.IsIncreasing(t, seen)

	r := do(t, "GET", base+api.PathLeases+"?limit=0", nil)
	require.Equal(t, http.StatusBadRequest, r.status)
	r = do(t, "GET", base+api.PathLeases+"?limit=1001", nil)
	require.Equal(t, http.StatusBadRequest, r.status)
}
