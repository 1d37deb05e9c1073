package console

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/stretchr/testify/require"
)

// stream opens /live and returns its "data:" lines.
func stream(t *testing.T, s *Server) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+"live", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	out := make(chan string, 16)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				out <- d
			}
		}
	}()
	return out
}

func next(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case d := <-ch:
		return d
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
		return ""
	}
}

func TestOpenPagesShareOneWatchAndHearOfChanges(t *testing.T) {
	f := newFakeCluster()
	s := startConsole(t, f)
	a, b := stream(t, s), stream(t, s)
	require.JSONEq(t, `{"reset":true}`, next(t, a), "a new page reads itself once")
	require.JSONEq(t, `{"reset":true}`, next(t, b))
	// Wait until the watch holds a position, then change a task.
	require.Eventually(t, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.watches >= 1
	}, 5*time.Second, 5*time.Millisecond)
	f.event(api.HistoryEvent{Kind: "revoke", TaskID: "t1"})
	require.JSONEq(t, `{"tasks":["t1"]}`, next(t, a))
	require.JSONEq(t, `{"tasks":["t1"]}`, next(t, b))
	// The answering member changed (or restarted): its numbers are not
	// ours, so pages read themselves again instead of trusting them.
	f.mu.Lock()
	f.feedID = "another member"
	f.mu.Unlock()
	f.event(api.HistoryEvent{Kind: "revoke", TaskID: "t2"})
	require.JSONEq(t, `{"reset":true}`, next(t, a))
	require.JSONEq(t, `{"reset":true}`, next(t, b))
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	require.Equal(t, 1, s.hub.watches, "one watch loop for every open page")
}
