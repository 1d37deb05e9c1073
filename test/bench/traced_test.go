package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The sink counts trace exports and refuses any other call.
func TestOTLPSinkTakesOnlyTraceExports(t *testing.T) {
	s, err := startOTLPSink(&ports{})
	require.NoError(t, err)
	defer s.close()
	require.True(t, strings.HasPrefix(s.addr, "127.0.0.1:"))

	for _, c := range []struct{ method, path string }{{"GET", "/v1/traces"}, {"POST", "/v1/metrics"}, {"POST", "/"}} {
		req, err := http.NewRequest(c.method, s.endpoint()+c.path, strings.NewReader("x"))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusNotFound, resp.StatusCode, "%s %s", c.method, c.path)
	}
	require.Zero(t, s.posts.Load())

	resp, err := http.Post(s.endpoint()+"/v1/traces", "application/x-protobuf", strings.NewReader("spans"))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, int64(1), s.posts.Load())
	require.Equal(t, int64(5), s.bytes.Load())
}
