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
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

func TestMain(m *testing.M) {
	// fasthttp's own housekeeping goroutines (worker-pool and connection
	// cleaners, the server date ticker) sleep in a loop and exit by
	// themselves some seconds after their owner is gone; they are not ours.
	goleak.VerifyTestMain(m,
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

// fakeLease is the fake cluster's record of one live lease.
type fakeLease struct {
	epoch  uint64
	sid    string
	signal string // delivered on the next heartbeat
	status lease.Status
}

// fakeCluster is an in-memory test double of the lease cluster.
type fakeCluster struct {
	mu        sync.Mutex
	nextEpoch uint64
	nextSess  int
	validFor  time.Duration
	hbEvery   time.Duration
	signature string
	leases    map[string]*fakeLease
	ckpt      map[string]*lease.Checkpoint
	hbCalls   []api.HeartbeatRequest
	hbErr     error         // when set, heartbeats fail
	hbBlock   chan struct{} // when set, heartbeats block until it is closed
	inFlight  int
	maxFlight int
	releases  []api.ReleaseRequest
	relErr    error // when set, Release fails with it
	closed    []string
}

func newFakeCluster() *fakeCluster {
	return &fakeCluster{
		nextEpoch: 100, validFor: 10 * time.Second, hbEvery: 3 * time.Second,
		leases: make(map[string]*fakeLease), ckpt: make(map[string]*lease.Checkpoint),
	}
}

func (f *fakeCluster) OpenSession(_ context.Context, req api.OpenSessionRequest) (api.Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextSess++
	return api.Session{SessionID: "s" + string(rune('0'+f.nextSess)), WorkerID: req.WorkerID}, nil
}

func (f *fakeCluster) CloseSession(_ context.Context, sid string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = append(f.closed, sid)
	return nil
}

func (f *fakeCluster) HeartbeatOnce(ctx context.Context, sid string, req api.HeartbeatRequest) (api.HeartbeatResponse, error) {
	f.mu.Lock()
	f.hbCalls = append(f.hbCalls, req)
	f.inFlight++
	if f.inFlight > f.maxFlight {
		f.maxFlight = f.inFlight
	}
	block, hbErr := f.hbBlock, f.hbErr
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	}()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return api.HeartbeatResponse{}, ctx.Err()
		}
	}
	if hbErr != nil {
		return api.HeartbeatResponse{}, hbErr
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := api.HeartbeatResponse{ValidForMs: f.validFor.Milliseconds()}
	for _, h := range req.Leases {
		l := f.leases[h.TaskID]
		switch {
		case l == nil:
			resp.Leases = append(resp.Leases, api.LeaseState{TaskID: h.TaskID, Epoch: h.Epoch, Status: lease.StatusExpired, Signal: api.SignalLost})
		case l.epoch != h.Epoch || l.sid != sid:
			resp.Leases = append(resp.Leases, api.LeaseState{TaskID: h.TaskID, Epoch: l.epoch, Status: lease.StatusActive, Signal: api.SignalLost})
		case l.signal != "":
			resp.Leases = append(resp.Leases, api.LeaseState{TaskID: h.TaskID, Epoch: l.epoch, Status: l.status, Signal: l.signal})
			if l.signal != api.SignalRevived {
				delete(f.leases, h.TaskID)
			} else {
				resp.Leases[len(resp.Leases)-1].ValidForMs = f.validFor.Milliseconds()
				l.signal, l.status = "", lease.StatusActive
			}
		default:
			resp.Leases = append(resp.Leases, api.LeaseState{TaskID: h.TaskID, Epoch: l.epoch, Status: lease.StatusActive, ValidForMs: f.validFor.Milliseconds()})
		}
	}
	return resp, nil
}

func (f *fakeCluster) grantLocked(taskID, sid string) api.Grant {
	f.nextEpoch++
	f.leases[taskID] = &fakeLease{epoch: f.nextEpoch, sid: sid, status: lease.StatusActive}
	task := lease.Task{ID: taskID, State: lease.TaskLeased, MaxEpoch: f.nextEpoch}
	if cp := f.ckpt[taskID]; cp != nil {
		c := *cp
		task.Checkpoint = &c
	}
	return api.Grant{
		Lease:          lease.Lease{TaskID: taskID, Epoch: f.nextEpoch, SessionID: sid, Status: lease.StatusActive},
		Task:           task,
		ValidForMs:     f.validFor.Milliseconds(),
		HeartbeatMs:    f.hbEvery.Milliseconds(),
		TokenSignature: f.signature,
	}
}

func (f *fakeCluster) Acquire(_ context.Context, taskID string, req api.AcquireRequest) (api.Grant, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l := f.leases[taskID]; l != nil && l.sid != req.SessionID {
		return api.Grant{}, lease.ErrLeaseHeld
	}
	return f.grantLocked(taskID, req.SessionID), nil
}

func (f *fakeCluster) Claim(_ context.Context, req api.ClaimRequest) (api.Grant, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.grantLocked("claimed", req.SessionID), nil
}

func (f *fakeCluster) current(taskID, sid string, epoch uint64) error {
	l := f.leases[taskID]
	if l == nil || l.epoch != epoch || l.sid != sid {
		return lease.ErrStaleEpoch
	}
	return nil
}

func (f *fakeCluster) Checkpoint(_ context.Context, taskID string, req api.CheckpointRequest) (*lease.Task, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.current(taskID, req.SessionID, req.Epoch); err != nil {
		return nil, err
	}
	cp := f.ckpt[taskID]
	seq := uint64(1)
	if cp != nil {
		seq = cp.Seq + 1
	}
	if req.Seq != 0 {
		seq = req.Seq
	}
	f.ckpt[taskID] = &lease.Checkpoint{Seq: seq, Step: req.Step, Data: req.Data, Epoch: req.Epoch}
	c := *f.ckpt[taskID]
	return &lease.Task{ID: taskID, Checkpoint: &c}, nil
}

func (f *fakeCluster) Wait(_ context.Context, taskID string, req api.WaitRequest) (*lease.Task, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.current(taskID, req.SessionID, req.Epoch); err != nil {
		return nil, err
	}
	delete(f.leases, taskID)
	return &lease.Task{ID: taskID, State: lease.TaskWaiting}, nil
}

func (f *fakeCluster) Release(_ context.Context, taskID string, req api.ReleaseRequest) (*lease.Task, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.relErr != nil {
		return nil, f.relErr
	}
	if err := f.current(taskID, req.SessionID, req.Epoch); err != nil {
		return nil, err
	}
	delete(f.leases, taskID)
	f.releases = append(f.releases, req)
	return &lease.Task{ID: taskID, State: lease.TaskPending}, nil
}

// signal queues a signal for the next heartbeat about taskID.
func (f *fakeCluster) signal(taskID, sig string, st lease.Status) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l := f.leases[taskID]; l != nil {
		l.signal, l.status = sig, st
	}
}

func (f *fakeCluster) heartbeats() []api.HeartbeatRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]api.HeartbeatRequest(nil), f.hbCalls...)
}

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
	eventually(t, func() bool { return s.keeper.SessionID() != "" }, "session open")
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
	_, epoch, _ := s.keeper.table.resolve(task)
	return api.CheckpointRequest{SessionID: s.keeper.SessionID(), Epoch: epoch, Seq: seq}
}

// counterValue reads a counter or gauge.
func counterValue(t testing.TB, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	require.NoError(t, m.Write(&d))
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}
