package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/raftstore/httpapi"
	"github.com/fencepost/fencepost/raftstore/httpapi/httpapitest"
)

func TestPprofOnlyWhenEnabled(t *testing.T) {
	off := "http://" + startServer(t, httpapitest.New()).Addr()
	require.Equal(t, http.StatusNotFound, do(t, "GET", off+"/debug/pprof/goroutine?debug=1", nil).status)

	on := "http://" + startServer(t, httpapitest.New(), func(c *httpapi.Config) { c.Pprof = true }).Addr()
	r := do(t, "GET", on+"/debug/pprof/goroutine?debug=1", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Contains(t, string(r.body), "goroutine")
}
