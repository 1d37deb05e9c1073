package proxy

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/workertie"
)

// streamEvent is one event as a client of the stream reads it.
type streamEvent struct {
	ID     string
	Kind   string `json:"kind"`
	TaskID string `json:"taskId"`
	Epoch  uint64 `json:"epoch"`
	Reason string `json:"reason"`
	Stop   bool   `json:"stop"`
	Seq    uint64 `json:"seq"`
}

// stream is an open GET of an event route.
type stream struct {
	resp *http.Response
	br   *bufio.Reader
	tr   *http.Transport
}

// openStream opens path (events or attach) with an optional Last-Event-ID.
func openStream(t *testing.T, s *Sidecar, path, lastID string) *stream {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+s.ControlAddr()+path, nil)
	require.NoError(t, err)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	tr := &http.Transport{}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	st := &stream{resp: resp, br: bufio.NewReader(resp.Body), tr: tr}
	t.Cleanup(st.close)
	return st
}

// close ends the stream as a dying worker's kernel would: the connection
// closes.
func (st *stream) close() {
	_ = st.resp.Body.Close()
	st.tr.CloseIdleConnections()
}

// next reads the next event, skipping comments.
func (st *stream) next(t *testing.T) streamEvent {
	t.Helper()
	var ev streamEvent
	for {
		line, err := st.br.ReadString('\n')
		require.NoError(t, err)
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if ev.Kind != "" {
				return ev
			}
		case strings.HasPrefix(line, "id: "):
			ev.ID = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev))
		}
	}
}

// releases returns the fake cluster's releases so far.
func releases(fc *fakeCluster) []api.ReleaseRequest {
	fc.Mu.Lock()
	defer fc.Mu.Unlock()
	return append([]api.ReleaseRequest(nil), fc.Releases...)
}

// Closing an attach stream without a release gives the lease back at
// once, reason worker_exited; the stream's own events said stop.
func TestAttachCloseGivesTheLeaseBack(t *testing.T) {
	fc := newFakeCluster()
	s := startSidecar(t, fc, baseConfig(t))
	g := mustAcquire(t, s, "t")
	st := openStream(t, s, PathAttach+"?task=t", "")
	ev := st.next(t)
	require.Equal(t, streamEvent{ID: ev.ID, Kind: "state", TaskID: "t", Epoch: g.Lease.Epoch, Seq: ev.Seq}, ev)
	st.close()
	eventually(t, func() bool { return len(releases(fc)) == 1 }, "the lease given back")
	r := releases(fc)[0]
	require.Equal(t, lease.OutcomeGivenBack, r.Outcome)
	require.Equal(t, lease.ReasonWorkerExited, r.Reason)
	require.Equal(t, g.Lease.Epoch, r.Epoch)
	require.Empty(t, s.Leases())

	// Another stream sees the release, with stop.
	ev2 := openStream(t, s, PathEvents, ev.ID).next(t)
	require.Equal(t, "released", ev2.Kind)
	require.Equal(t, lease.ReasonWorkerExited, ev2.Reason)
	require.True(t, ev2.Stop)
}

// A worker that completes first and then closes changes nothing; so does a
// plain events stream's close.
func TestAttachCloseAfterCompleteChangesNothing(t *testing.T) {
	fc := newFakeCluster()
	s := startSidecar(t, fc, baseConfig(t))
	mustAcquire(t, s, "t")
	events := openStream(t, s, PathEvents, "")
	events.next(t)
	events.close()
	st := openStream(t, s, PathAttach, "")
	st.next(t)
	code, body := ctl(t, s, "POST", PathComplete, `{}`)
	require.Equal(t, 200, code, body)
	st.close()
	require.Never(t, func() bool { return len(releases(fc)) != 1 }, 300*time.Millisecond, 20*time.Millisecond)
	require.Equal(t, lease.OutcomeCompleted, releases(fc)[0].Outcome)
}

// An attach without a task ties leases acquired while it is open too.
func TestAttachTiesLeasesAcquiredLater(t *testing.T) {
	fc := newFakeCluster()
	s := startSidecar(t, fc, baseConfig(t))
	st := openStream(t, s, PathAttach, "")
	require.Equal(t, "state", st.next(t).Kind)
	mustAcquire(t, s, "a")
	require.Equal(t, "acquired", st.next(t).Kind)
	st.close()
	eventually(t, func() bool { return len(releases(fc)) == 1 }, "the later lease given back")
	require.Equal(t, lease.ReasonWorkerExited, releases(fc)[0].Reason)
}

// A progress mark rides the next heartbeat as sinceProgressMs; without a
// current lease it is a 409.
func TestProgressRidesTheHeartbeat(t *testing.T) {
	fc := newFakeCluster()
	s := startSidecar(t, fc, baseConfig(t))
	code, body := ctl(t, s, "POST", PathProgress, `{}`)
	require.Equal(t, 409, code, body)
	mustAcquire(t, s, "t")
	s.keeper.HeartbeatOnce(t.Context())
	hbs := fc.Heartbeats()
	require.Zero(t, hbs[len(hbs)-1].Leases[0].SinceProgressMs, "no mark yet")
	code, body = ctl(t, s, "POST", PathProgress, `{"taskId":"t"}`)
	require.Equal(t, 204, code, body)
	s.keeper.HeartbeatOnce(t.Context())
	hbs = fc.Heartbeats()
	require.Positive(t, hbs[len(hbs)-1].Leases[0].SinceProgressMs)
}

// Only the worker beside the sidecar may attach or mark progress: a
// cross-origin request (a web page the worker's browser opened) is refused.
func TestStrangerCannotAttachOrMarkProgress(t *testing.T) {
	fc := newFakeCluster()
	s := startSidecar(t, fc, baseConfig(t))
	mustAcquire(t, s, "t")
	for _, c := range []struct{ method, path, body string }{
		{"GET", PathAttach, ""}, {"GET", PathEvents, ""}, {"POST", PathProgress, `{}`},
	} {
		req, err := http.NewRequest(c.method, "http://"+s.ControlAddr()+c.path, strings.NewReader(c.body))
		require.NoError(t, err)
		req.Header.Set("Origin", "https://evil.example")
		if c.method == "POST" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusForbidden, resp.StatusCode, c.path)
	}
	require.Empty(t, releases(fc))
}

// The probe: a worker whose health URL fails threshold times in a row has
// its leases given back, reason worker_unhealthy.
func TestProbeFailureGivesTheLeaseBack(t *testing.T) {
	var failing atomic.Bool
	var passed atomic.Int32
	h := http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if failing.Load() {
			w.WriteHeader(500)
			return
		}
		passed.Add(1)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = h.Serve(ln) }()
	t.Cleanup(func() { _ = h.Close() })
	fc := newFakeCluster()
	cfg := baseConfig(t)
	cfg.Worker.Health = workertie.Health{URL: "http://" + ln.Addr().String() + "/healthz", Interval: 30 * time.Millisecond,
		Timeout: 30 * time.Millisecond, Threshold: 2}
	s := startSidecar(t, fc, cfg)
	g := mustAcquire(t, s, "t")
	eventually(t, func() bool { return passed.Load() > 0 }, "the worker healthy once")
	failing.Store(true)
	eventually(t, func() bool { return len(releases(fc)) == 1 }, "the lease given back")
	r := releases(fc)[0]
	require.Equal(t, lease.ReasonWorkerUnhealthy, r.Reason)
	require.Equal(t, g.Lease.Epoch, r.Epoch)
}

// A stream outlives the server's read and idle timeouts (fasthttp lifts
// them from a taken-over connection): only the client's close ends the
// worker's tie.
func TestAttachOutlivesTheServerTimeouts(t *testing.T) {
	fc := newFakeCluster()
	cfg := baseConfig(t)
	cfg.ReadTimeout, cfg.IdleTimeout = 100*time.Millisecond, 100*time.Millisecond
	s := startSidecar(t, fc, cfg)
	mustAcquire(t, s, "t")
	st := openStream(t, s, PathAttach, "")
	st.next(t)
	require.Never(t, func() bool { return len(releases(fc)) > 0 }, 600*time.Millisecond, 20*time.Millisecond)
	st.close()
	eventually(t, func() bool { return len(releases(fc)) == 1 }, "the lease given back on the close")
}
