package httpapi_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/raftstore/httpapi"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap/zaptest"
)

// startServer serves store on a free loopback port until the test ends.
func startServer(t *testing.T, store httpapi.Store, mod ...func(*httpapi.Config)) *httpapi.Server {
	t.Helper()
	cfg := httpapi.Config{Addr: "127.0.0.1:0", Logger: zaptest.NewLogger(t)}
	for _, m := range mod {
		m(&cfg)
	}
	s, err := httpapi.New(cfg, store)
	require.NoError(t, err)
	require.NoError(t, s.Start())
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// reply is a response copied out of fasthttp's pooled buffers.
type reply struct {
	status int
	header map[string]string
	body   []byte
}

func (r reply) problem(t *testing.T) api.Problem {
	t.Helper()
	require.Equal(t, api.ProblemContentType, r.header["Content-Type"], "body: %s", r.body)
	var p api.Problem
	require.NoError(t, json.Unmarshal(r.body, &p))
	require.Equal(t, r.status, p.Status)
	require.Equal(t, api.ProblemTypeBase+p.Code, p.Type)
	return p
}

func (r reply) decode(t *testing.T, v any) {
	t.Helper()
	require.Less(t, r.status, 300, "body: %s", r.body)
	require.NoError(t, json.Unmarshal(r.body, v))
}

var testClient = &fasthttp.Client{MaxIdemponentCallAttempts: 1, DisablePathNormalizing: true}

// do sends one request; headers are name/value pairs.
func do(t *testing.T, method, url string, body []byte, headers ...string) reply {
	t.Helper()
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(method)
	req.SetRequestURI(url)
	req.URI().DisablePathNormalizing = true
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	if body != nil {
		req.Header.SetContentType("application/json")
		req.SetBody(body)
	}
	require.NoError(t, testClient.DoTimeout(req, resp, 5*time.Second))
	r := reply{status: resp.StatusCode(), header: map[string]string{}, body: append([]byte(nil), resp.Body()...)}
	for k, v := range resp.Header.All() {
		r.header[string(k)] = string(v)
	}
	return r
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
