package console

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync"
	"testing"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/cluster"
	"github.com/fencepost/fencepost/raftstore/httpapi"
	"github.com/fencepost/fencepost/raftstore/httpapi/httpapitest"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

// benchTasks is the cluster size the Tasks page is measured at.
const benchTasks = 100_000

var (
	benchOnce    sync.Once
	benchConsole *Server
)

// benchStack serves 100,000 tasks (1,000 of them leased) through the real
// HTTP API (over the real lease model, in memory: no raft round) and the
// real Go client, with a console in front, all on loopback TCP.
func benchStack(b *testing.B) *Server {
	benchOnce.Do(func() {
		store := httpapitest.New()
		ctx := context.Background()
		sess, err := store.OpenSession(ctx, "open", api.OpenSessionRequest{WorkerID: "w1"})
		require.NoError(b, err)
		for i := range benchTasks {
			id := fmt.Sprintf("task-%06d", i)
			if i%100 == 0 {
				_, err = store.Acquire(ctx, "a"+id, id, api.AcquireRequest{SessionID: sess.SessionID, Create: true})
			} else {
				_, err = store.CreateTask(ctx, "c"+id, api.CreateTaskRequest{TaskID: id})
			}
			require.NoError(b, err)
		}
		srv, err := httpapi.New(httpapi.Config{Addr: "127.0.0.1:0", Logger: zap.NewNop()}, store)
		require.NoError(b, err)
		require.NoError(b, srv.Start())
		cl, err := cluster.New(cluster.Config{Endpoints: []string{srv.Addr()}})
		require.NoError(b, err)
		benchConsole, err = Start(Config{Listen: "127.0.0.1:0", Cluster: cl, Identity: operatorID})
		require.NoError(b, err)
	})
	return benchConsole
}

// BenchmarkTasksPage measures the Tasks page at 100,000 tasks: the time to
// its first byte (first-byte-ms, the budget is 100 ms) and its weight with
// the style and script it loads (page-bytes, the budget is 250 KB).
func BenchmarkTasksPage(b *testing.B) {
	s := benchStack(b)
	c := &http.Client{Timeout: 10 * time.Second}
	assets := 0
	for _, p := range []string{"static/style.css", "static/app.js"} {
		resp, err := c.Get(s.URL() + p)
		require.NoError(b, err)
		n, _ := io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		assets += int(n)
	}
	for _, bc := range []struct{ name, path string }{
		{"first", "tasks"},
		{"middle", "tasks?after=task-050000"},
		{"prefix", "tasks?q=task-0999"},
		{"leased", "tasks?state=leased"},
		{"profile-scan", "tasks?profile=workflow"}, // none match: reads ScanBudget tasks
	} {
		b.Run(bc.name, func(b *testing.B) {
			var first time.Duration
			var size int64
			for b.Loop() {
				var got time.Time
				start := time.Now()
				ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
					GotFirstResponseByte: func() { got = time.Now() }})
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+bc.path, nil)
				require.NoError(b, err)
				resp, err := c.Do(req)
				require.NoError(b, err)
				size, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				require.Equal(b, http.StatusOK, resp.StatusCode)
				first += got.Sub(start)
			}
			b.ReportMetric(float64(first.Microseconds())/1000/float64(b.N), "first-byte-ms")
			b.ReportMetric(float64(size+int64(assets)), "page-bytes")
		})
	}
}

// BenchmarkTasksListAPI is the cluster's share of the Tasks page: one
// GET /v1/tasks?limit=50 at 100,000 tasks through the Go client.
func BenchmarkTasksListAPI(b *testing.B) {
	s := benchStack(b)
	for b.Loop() {
		_, err := s.cfg.Cluster.Tasks(context.Background(), lease.TaskFilter{Limit: DefaultPageSize}, false)
		require.NoError(b, err)
	}
}
