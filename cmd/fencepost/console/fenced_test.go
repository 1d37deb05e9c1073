package console

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTaskTimelineShowsTheWritesTheFencedServiceAccepted(t *testing.T) {
	log := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"entries":[{"seq":1,"task":"t1","epoch":3,"holder":"w1","idempotency_key":"k-1","body_len":6,"at":"2026-01-01T10:00:00Z"},
			{"seq":2,"task":"other","epoch":9,"holder":"w2","body_len":1,"at":"2026-01-01T10:00:01Z"}]}`))
	}))
	defer log.Close()
	f := newFakeCluster()
	f.acquire(t, "w1", "t1")
	s := startConsole(t, f, func(c *Config) { c.FencedLogURL = log.URL })
	status, body := get(t, browser(t), s, "/tasks/t1?fragment=1")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "<strong>fenced write</strong> <span class=\"epoch\">epoch 3</span> accepted downstream from w1, 6 bytes, key k-1")
	require.NotContains(t, body, "epoch 9", "another task's writes stay off")

	log.Close()
	_, body = get(t, browser(t), s, "/tasks/t1?fragment=1")
	require.Contains(t, body, "The fenced service's log could not be read")
}
