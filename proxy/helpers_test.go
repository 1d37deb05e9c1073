package proxy

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/proxy/proxytest"
)

func TestMain(m *testing.M) {
	// fasthttp's own housekeeping goroutines (worker-pool and connection
	// cleaners, the server date ticker) sleep in a loop and exit by
	// themselves some seconds after their owner is gone; they are not ours.
	// The default dialer's address-cache cleaner (started by the bare
	// forwarder of BenchmarkRawBareProxy*, which dials the way the bench
	// harness's does) is one per process and never ends.
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*Client).mCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
	)
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", msg)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// fakeCluster is the in-memory lease cluster the tests share.
type fakeCluster = proxytest.Cluster

func newFakeCluster() *fakeCluster { return proxytest.NewCluster() }

// testLogger logs at warn level and above into the test log.
func testLogger(t testing.TB) *zap.Logger {
	return zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
}

// baseConfig is a fast-test configuration on ephemeral loopback ports.
func baseConfig(t testing.TB) Config {
	return Config{
		WorkerID:     "worker-1",
		ProxyAddr:    "127.0.0.1:0",
		ControlAddr:  "127.0.0.1:0",
		Registerer:   prometheus.NewRegistry(),
		Logger:       testLogger(t),
		DrainTimeout: 2 * time.Second,
		ReadTimeout:  2 * time.Second,
		IdleTimeout:  2 * time.Second,
		// Short so that tests of hung upstreams finish quickly.
		UpstreamTimeout: 2 * time.Second,
	}
}

// startSidecar starts a sidecar and waits for its session.
func startSidecar(t testing.TB, fc Cluster, cfg Config) *Sidecar {
	t.Helper()
	s, err := New(cfg, fc)
	require.NoError(t, err)
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	eventually(t, func() bool { return s.keeper.SessionFor("") != "" }, "session open")
	return s
}

// mustAcquire acquires taskID through the sidecar.
func mustAcquire(t testing.TB, s *Sidecar, taskID string) api.Grant {
	t.Helper()
	g, err := s.keeper.Acquire(context.Background(), taskID, false, api.AcquireRequest{Create: true})
	require.NoError(t, err)
	return g
}

// seen is one request an upstream received.
type seen struct {
	Method string
	URI    string
	Host   string
	Header [][2]string
	Body   string
}

// values returns every value of header name (case-insensitive).
func (s seen) values(name string) []string {
	var out []string
	for _, kv := range s.Header {
		if http.CanonicalHeaderKey(kv[0]) == http.CanonicalHeaderKey(name) {
			out = append(out, kv[1])
		}
	}
	return out
}

// upstreamServer is a recording fasthttp upstream on loopback.
type upstreamServer struct {
	ln      net.Listener
	srv     *fasthttp.Server
	mu      sync.Mutex
	reqs    []seen
	handler func(ctx *fasthttp.RequestCtx)
}

func startUpstream(t testing.TB, h func(ctx *fasthttp.RequestCtx)) *upstreamServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return startUpstreamOn(t, ln, h)
}

// startUpstreamOn serves the recording upstream on ln (a TLS listener for
// an HTTPS upstream); opts adjust the server before it starts.
func startUpstreamOn(t testing.TB, ln net.Listener, h func(ctx *fasthttp.RequestCtx), opts ...func(*fasthttp.Server)) *upstreamServer {
	t.Helper()
	u := &upstreamServer{ln: ln, handler: h}
	u.srv = &fasthttp.Server{
		DisableHeaderNamesNormalizing: true,
		IdleTimeout:                   time.Second,
		Handler: func(ctx *fasthttp.RequestCtx) {
			r := seen{Method: string(ctx.Method()), URI: string(ctx.RequestURI()), Host: string(ctx.Host()), Body: string(ctx.PostBody())}
			for k, v := range ctx.Request.Header.All() {
				r.Header = append(r.Header, [2]string{string(k), string(v)})
			}
			u.mu.Lock()
			u.reqs = append(u.reqs, r)
			u.mu.Unlock()
			if u.handler != nil {
				u.handler(ctx)
				return
			}
			ctx.SetBodyString("ok")
		},
	}
	for _, o := range opts {
		o(u.srv)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = u.srv.Serve(ln)
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = u.srv.ShutdownWithContext(ctx)
		_ = ln.Close()
		<-done
	})
	return u
}

func (u *upstreamServer) addr() string { return u.ln.Addr().String() }

func (u *upstreamServer) requests() []seen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seen(nil), u.reqs...)
}

// proxyClient is a net/http client using the sidecar as HTTP_PROXY, with
// user (the task id) as proxy user name when non-empty.
func proxyClient(t testing.TB, s *Sidecar, user string) *http.Client {
	t.Helper()
	u := &url.URL{Scheme: "http", Host: s.ProxyAddr()}
	if user != "" {
		u.User = url.User(user)
	}
	tr := &http.Transport{Proxy: http.ProxyURL(u), DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func checkpointReq(s *Sidecar, task string, seq uint64) api.CheckpointRequest {
	_, epoch, _ := s.keeper.Resolve(task)
	return api.CheckpointRequest{SessionID: s.keeper.SessionFor(""), Epoch: epoch, Seq: seq}
}

// seriesValue reads one counter or gauge series of s's registry: the
// family name and, for a labelled family, the label value.
func seriesValue(t testing.TB, s *Sidecar, name string, label ...string) float64 {
	t.Helper()
	fams, err := s.cfg.Registerer.(prometheus.Gatherer).Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if len(label) > 0 && (len(m.GetLabel()) != 1 || m.GetLabel()[0].GetValue() != label[0]) {
				continue
			}
			if m.Counter != nil {
				return m.Counter.GetValue()
			}
			return m.Gauge.GetValue()
		}
	}
	t.Fatalf("no series %s%q", name, label)
	return 0
}

// problem is a problem document with the held tasks, as the sidecar
// answers an ambiguous request.
type problem struct {
	api.Problem
	Tasks []string `json:"tasks,omitempty"`
}
