package console

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/refsvc"
)

// TestTaskTimelineShowsRefusedWritesWithTheirTrace: a real reference
// service refuses an old owner's write; the task's timeline lists it with
// the reason, the max seen epoch and a link to its trace in the
// configured trace UI.
func TestTaskTimelineShowsRefusedWritesWithTheirTrace(t *testing.T) {
	svc, err := refsvc.New(refsvc.Config{Addr: "127.0.0.1:0", ServeLog: true})
	require.NoError(t, err)
	require.NoError(t, svc.Start())
	t.Cleanup(func() { require.NoError(t, svc.Close()) })
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	write := func(epoch, traceparent string) int {
		req, err := http.NewRequest(http.MethodPost, "http://"+svc.Addr()+"/v1/tasks/t1/writes", strings.NewReader("x"))
		require.NoError(t, err)
		req.Header.Set(fence.HeaderToken, epoch)
		req.Header.Set(fence.HeaderTask, "t1")
		req.Header.Set(fence.HeaderHolder, "w-old")
		if traceparent != "" {
			req.Header.Set("traceparent", traceparent)
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		return resp.StatusCode
	}
	require.Equal(t, http.StatusCreated, write("7", ""))
	require.Equal(t, http.StatusConflict, write("5", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))

	f := newFakeCluster()
	f.acquire(t, "w1", "t1")
	s := startConsole(t, f, func(c *Config) {
		c.FencedLogURL = "http://" + svc.Addr() + "/v1/log"
		c.TraceURL = "http://127.0.0.1:16686/trace/{trace_id}"
	})
	status, body := get(t, browser(t), s, "/tasks/t1?fragment=1")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, `<strong>refused downstream</strong> <span class="epoch">epoch 5</span> stale-token (409): the service has seen epoch 7 from w-old`)
	require.Contains(t, body, `<a class="trace" href="http://127.0.0.1:16686/trace/4bf92f3577b34da6a3ce929d0e0e4736"`)

	// Without a template the id is shown, not linked.
	s = startConsole(t, f, func(c *Config) { c.FencedLogURL = "http://" + svc.Addr() + "/v1/log" })
	_, body = get(t, browser(t), s, "/tasks/t1?fragment=1")
	require.Contains(t, body, `<span class="trace">trace 4bf92f3577b34da6a3ce929d0e0e4736</span>`)
	require.NotContains(t, body, `<a class="trace"`)
}

func TestTraceURLTemplateIsValidated(t *testing.T) {
	for _, bad := range []string{"http://h/trace", "h/{trace_id}", "javascript:alert(1)//{trace_id}"} {
		c := Config{Cluster: newFakeCluster(), TraceURL: bad}
		require.ErrorIs(t, c.Validate(), ErrBadTraceURL, bad)
	}
	c := Config{Cluster: newFakeCluster(), TraceURL: "https://ui.example/trace/{trace_id}?x=1"}
	require.NoError(t, c.Validate())
}

// TestTaskTimelineShowsWritesTheSidecarBlocked: a sidecar's report of the
// writes it blocked is on the timeline, counted, naming the first call
// and linking its trace.
func TestTaskTimelineShowsWritesTheSidecarBlocked(t *testing.T) {
	f := newFakeCluster()
	epoch := f.acquire(t, "w1", "t1")
	f.event(api.HistoryEvent{Time: time.Now(), Kind: api.EventBlocked, TaskID: "t1", Epoch: epoch, Reason: "revoked",
		By: "sidecar/w1", Method: "POST", URL: "tools:8080/v1/charge", Count: 4, TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"})
	s := startConsole(t, f, func(c *Config) { c.TraceURL = "http://127.0.0.1:16686/trace/{trace_id}" })
	status, body := get(t, browser(t), s, "/tasks/t1?fragment=1")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, `<li class="ev bad">`)
	require.Contains(t, body, `<strong>blocked by the sidecar</strong> <span class="epoch">epoch `)
	require.Contains(t, body, `4 calls, the first POST tools:8080/v1/charge — revoked [sidecar/w1] <a class="trace" href="http://127.0.0.1:16686/trace/4bf92f3577b34da6a3ce929d0e0e4736"`)
}
