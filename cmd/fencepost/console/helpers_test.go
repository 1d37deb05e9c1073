package console

import (
	"context"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/fence/pki"
	"github.com/fencepost/fencepost/raftstore/httpapi/httpapitest"
	"github.com/stretchr/testify/require"
)

// fakeCluster is a Cluster over the in-memory store of the HTTP API's
// tests (the real lease model), with a feed the test appends to.
type fakeCluster struct {
	store *httpapitest.Store

	mu       sync.Mutex
	feed     []api.HistoryEvent
	wake     chan struct{}
	watches  int // WatchEvents calls
	revokes  []api.RevokeRequest
	listings int    // Tasks calls
	feedID   string // the feed's name (api.EventFeed.Feed)
}

func newFakeCluster() *fakeCluster {
	return &fakeCluster{store: httpapitest.New(), wake: make(chan struct{})}
}

func (f *fakeCluster) Tasks(ctx context.Context, flt lease.TaskFilter, stale bool) (api.TaskList, error) {
	f.mu.Lock()
	f.listings++
	f.mu.Unlock()
	return f.store.Tasks(ctx, flt, stale)
}

func (f *fakeCluster) TaskSummary(ctx context.Context, id string, stale bool) (*lease.Task, error) {
	return f.store.Task(ctx, id, stale)
}

func (f *fakeCluster) TaskHistory(_ context.Context, id string) (api.TaskHistory, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := api.TaskHistory{TaskID: id, Events: []api.HistoryEvent{}}
	for _, e := range f.feed {
		if e.TaskID == id {
			out.Events = append(out.Events, e)
		}
	}
	return out, nil
}

// WatchEvents follows the raftstore contract: since 0 answers the
// position at once; otherwise it waits for an event after since.
func (f *fakeCluster) WatchEvents(ctx context.Context, since uint64, wait time.Duration) (api.EventFeed, error) {
	f.mu.Lock()
	f.watches++
	f.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	for waited := false; ; waited = true {
		f.mu.Lock()
		n, wake := uint64(len(f.feed)), f.wake
		if since == 0 && n > 0 && !waited {
			f.mu.Unlock()
			return api.EventFeed{Next: n, Feed: f.feedID}, nil // the position
		}
		if n > since {
			out := api.EventFeed{Events: append([]api.HistoryEvent{}, f.feed[since:]...), Next: n, Feed: f.feedID}
			f.mu.Unlock()
			return out, nil
		}
		f.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return api.EventFeed{Next: n, Feed: f.feedID}, ctx.Err()
		case <-t.C:
			return api.EventFeed{Next: n, Feed: f.feedID}, nil
		}
	}
}

func (f *fakeCluster) event(e api.HistoryEvent) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e.Seq = uint64(len(f.feed) + 1)
	f.feed = append(f.feed, e)
	close(f.wake)
	f.wake = make(chan struct{})
}

func (f *fakeCluster) Leases(ctx context.Context, stale bool) (api.LeaseList, error) {
	return f.store.Leases(ctx, api.LeasePage{}, stale)
}

func (f *fakeCluster) Sessions(context.Context, string, int) (api.SessionList, error) {
	return api.SessionList{Sessions: []api.SessionInfo{}}, nil
}

func (f *fakeCluster) Status(context.Context) (api.ClusterStatus, error) {
	return f.store.Status(), nil
}

func (f *fakeCluster) Ready(context.Context, string) error { return f.store.Ready() }

func (f *fakeCluster) Revoke(ctx context.Context, id string, req api.RevokeRequest) (*lease.Task, error) {
	f.mu.Lock()
	f.revokes = append(f.revokes, req)
	f.mu.Unlock()
	return f.store.Revoke(ctx, fmt.Sprint(time.Now().UnixNano()), id, req)
}

func (f *fakeCluster) Cancel(ctx context.Context, id string, req api.CancelRequest) (*lease.Task, error) {
	return f.store.Cancel(ctx, fmt.Sprint(time.Now().UnixNano()), id, req)
}

func (f *fakeCluster) Signal(ctx context.Context, id string, req api.SignalRequest) (*lease.Task, error) {
	return f.store.Signal(ctx, fmt.Sprint(time.Now().UnixNano()), id, req)
}

// createTasks creates ids with profile.
func (f *fakeCluster) createTasks(t testing.TB, profile string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		_, err := f.store.CreateTask(context.Background(), "c-"+id, api.CreateTaskRequest{TaskID: id, Profile: profile})
		require.NoError(t, err)
	}
}

// acquire grants id to a new session of worker and returns the epoch.
func (f *fakeCluster) acquire(t testing.TB, worker, id string) uint64 {
	t.Helper()
	ctx := context.Background()
	s, err := f.store.OpenSession(ctx, "o-"+worker+id, api.OpenSessionRequest{WorkerID: worker})
	require.NoError(t, err)
	g, err := f.store.Acquire(ctx, "a-"+id, id, api.AcquireRequest{SessionID: s.SessionID, Create: true})
	require.NoError(t, err)
	return g.Lease.Epoch
}

var (
	operatorID = pki.Identity{Name: "alice", Role: pki.RoleOperator}
	readerID   = pki.Identity{Name: "dashboard", Role: pki.RoleReader}
)

// startConsole serves a console over f on a free loopback port.
func startConsole(t *testing.T, f Cluster, mod ...func(*Config)) *Server {
	t.Helper()
	cfg := Config{Listen: "127.0.0.1:0", Cluster: f, Identity: operatorID}
	for _, m := range mod {
		m(&cfg)
	}
	s, err := Start(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// browser is an HTTP client with a cookie jar, as a browser would keep.
func browser(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// get fetches path and returns status and body.
func get(t *testing.T, c *http.Client, s *Server, path string) (int, string) {
	t.Helper()
	resp, err := c.Get(s.URL() + strings.TrimPrefix(path, "/"))
	require.NoError(t, err)
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = fmt.Fprint(&b, readAll(t, resp))
	return resp.StatusCode, b.String()
}

// post submits a form, with the CSRF token in it when csrf is set.
func post(t *testing.T, c *http.Client, s *Server, path string, form url.Values, headers ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL()+strings.TrimPrefix(path, "/"), strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	return resp.StatusCode, readAll(t, resp)
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}
