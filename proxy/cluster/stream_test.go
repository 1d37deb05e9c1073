package cluster_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/cluster"
	"github.com/fencepost/fencepost/raftstore/httpapi/httpapitest"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap/zapcore"
)

// metric reads one sample line's value from a member's /metrics ("" when
// the series is absent).
func metric(t *testing.T, addr, series string) string {
	t.Helper()
	code, body, err := fasthttp.Get(nil, "http://"+addr+api.PathMetrics)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}

func openSession(t *testing.T, c *cluster.Client) string {
	t.Helper()
	s, err := c.OpenSession(t.Context(), api.OpenSessionRequest{WorkerID: "w"})
	require.NoError(t, err)
	return s.SessionID
}

func beatOnce(c *cluster.Client, sid string, budget time.Duration) (api.HeartbeatResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	return c.HeartbeatOnce(ctx, sid, api.HeartbeatRequest{})
}

// By default heartbeats go on one stream per member; TransportUnary sends
// requests and opens none.
func TestHeartbeatTransports(t *testing.T) {
	for _, tr := range []string{"", cluster.TransportStream, cluster.TransportUnary} {
		t.Run(tr, func(t *testing.T) {
			addr := serve(t, httpapitest.New())
			c := newClient(t, func(cfg *cluster.Config) { cfg.HeartbeatTransport = tr }, addr)
			sid := openSession(t, c)
			for range 3 {
				_, err := beatOnce(c, sid, time.Second)
				require.NoError(t, err)
			}
			streams := metric(t, addr, "fencepost_http_heartbeat_streams")
			beats := metric(t, addr, `fencepost_http_requests_total{code="200",method="POST",route="`+api.PathHeartbeatStream+`"}`)
			if tr == cluster.TransportUnary {
				require.Equal(t, "0", streams)
				require.Empty(t, beats)
				return
			}
			require.Equal(t, "1", streams, "one stream carried every beat")
			require.Equal(t, "3", beats)
			c.Close()
			httpapitest.WaitFor(t, "the member sees the stream closed", func() bool {
				return metric(t, addr, "fencepost_http_heartbeat_streams") == "0"
			})
		})
	}
	_, err := cluster.New(cluster.Config{Endpoints: []string{"127.0.0.1:1"}, HeartbeatTransport: "grpc"})
	require.ErrorIs(t, err, cluster.ErrConfig)
	require.ErrorContains(t, err, "HeartbeatTransport")
}

// oldMember serves the API of addr as a member without the stream route
// would (an older version): 404 for it, everything else proxied. It
// counts the upgrades it refused and the unary heartbeats it passed.
func oldMember(t *testing.T, addr string) (string, *atomic.Int32, *atomic.Int32) {
	t.Helper()
	var upgrades, unary atomic.Int32
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: addr})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == api.PathHeartbeatStream {
			upgrades.Add(1)
			w.Header().Set("Content-Type", api.ProblemContentType)
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"type":"`+api.ProblemTypeBase+`not_found","status":404,"code":"not_found"}`)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/heartbeat") {
			unary.Add(1)
		}
		rp.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String(), &upgrades, &unary
}

// A member without the route gets unary heartbeats, and the client
// remembers it: one refused upgrade, however many heartbeats follow.
func TestHeartbeatFallsBackToUnaryOnAnOlderMember(t *testing.T) {
	old, upgrades, unary := oldMember(t, serve(t, httpapitest.New()))
	c := newClient(t, nil, old)
	sid := openSession(t, c)
	for range 4 {
		_, err := beatOnce(c, sid, time.Second)
		require.NoError(t, err)
	}
	require.Equal(t, int32(1), upgrades.Load())
	require.Equal(t, int32(4), unary.Load())
}

// cutter relays TCP to addr and can cut every connection it carries.
type cutter struct {
	mu       sync.Mutex
	conns    []net.Conn
	accepted atomic.Int32
}

func newCutter(t *testing.T, addr string) (string, *cutter) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	k := &cutter{}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); k.cut(); wg.Wait() })
	wg.Go(func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", addr)
			if err != nil {
				_ = in.Close()
				continue
			}
			k.accepted.Add(1)
			k.mu.Lock()
			k.conns = append(k.conns, in, out)
			k.mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(out, in); _ = out.Close() })
			wg.Go(func() { _, _ = io.Copy(in, out); _ = in.Close() })
		}
	})
	return ln.Addr().String(), k
}

func (k *cutter) cut() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, c := range k.conns {
		_ = c.Close()
	}
	k.conns = nil
}

// A broken stream fails only the beats in flight on it (the hedge moves
// on); the next heartbeat dials a new one.
func TestHeartbeatRedialsABrokenStream(t *testing.T) {
	addr, k := newCutter(t, serve(t, httpapitest.New()))
	c := newClient(t, nil, addr)
	sid := openSession(t, c)
	_, err := beatOnce(c, sid, time.Second)
	require.NoError(t, err)
	before := k.accepted.Load()
	k.cut()
	httpapitest.WaitFor(t, "a heartbeat on a new stream", func() bool {
		_, err := beatOnce(c, sid, time.Second)
		return err == nil
	})
	require.Greater(t, k.accepted.Load(), before, "redialled")
}

// The leader the client streams to dies mid-stream: heartbeats go on
// through the other members and the lease stays current.
func TestHeartbeatStreamSurvivesALeaderChange(t *testing.T) {
	cl := httpapitest.StartCluster(t, 3, zapcore.ErrorLevel)
	leader := cl.WaitLeader()
	follower := cl.Follower()
	eps := append([]string{cl.Nodes[leader].HTTP.Addr()}, cl.Endpoints()...)
	c := newClient(t, func(cfg *cluster.Config) { cfg.Timeout = 500 * time.Millisecond }, eps...)
	sid := openSession(t, c)
	g, err := c.Acquire(t.Context(), "t", api.AcquireRequest{SessionID: sid, Create: true})
	require.NoError(t, err)
	hb, err := beatOnce(c, sid, time.Second)
	require.NoError(t, err)
	require.Equal(t, "1", metric(t, cl.Nodes[leader].HTTP.Addr(), "fencepost_http_heartbeat_streams"))

	cl.Kill(leader)
	start := time.Now()
	httpapitest.WaitFor(t, "a heartbeat after the leader died", func() bool {
		hb, err = beatOnce(c, sid, time.Second)
		return err == nil
	})
	t.Logf("heartbeats resumed %v after the leader was killed", time.Since(start))
	require.Len(t, hb.Leases, 1)
	require.Equal(t, g.Lease.Epoch, hb.Leases[0].Epoch)
	require.Equal(t, lease.StatusActive, hb.Leases[0].Status)
	require.Positive(t, hb.Leases[0].ValidForMs)

	// A client that can reach only a follower streams to it, and the
	// follower relays every beat to the leader.
	nl := cl.WaitLeader()
	only := follower
	if only == nl || only == leader {
		for i := range cl.Nodes {
			if i != nl && i != leader {
				only = i
			}
		}
	}
	relayed := `fencepost_http_forwards_total{result="ok"}`
	before := metric(t, cl.Nodes[only].HTTP.Addr(), relayed)
	fc := newClient(t, nil, cl.Nodes[only].HTTP.Addr())
	hb, err = beatOnce(fc, sid, time.Second)
	require.NoError(t, err)
	require.Positive(t, hb.Leases[0].ValidForMs)
	require.NotEqual(t, before, metric(t, cl.Nodes[only].HTTP.Addr(), relayed), "the follower relayed the beat")
}
