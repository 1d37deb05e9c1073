package workertie

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestVerdict(t *testing.T) {
	h := Health{Threshold: 2, StartPeriod: 10 * time.Second}
	t0 := time.Unix(0, 0)
	v := newVerdict(h, t0)
	// Starting: failures do not count within the start period.
	require.Equal(t, unchanged, v.observe(false, t0.Add(time.Second)))
	require.Equal(t, unchanged, v.observe(false, t0.Add(2*time.Second)))
	require.Equal(t, unchanged, v.observe(true, t0.Add(3*time.Second)))
	// Up: threshold failures in a row make it unhealthy, once.
	require.Equal(t, unchanged, v.observe(false, t0.Add(4*time.Second)))
	require.Equal(t, unchanged, v.observe(true, t0.Add(5*time.Second)), "a success resets the count")
	require.Equal(t, unchanged, v.observe(false, t0.Add(6*time.Second)))
	require.Equal(t, turnedUnhealthy, v.observe(false, t0.Add(7*time.Second)))
	require.Equal(t, unchanged, v.observe(false, t0.Add(8*time.Second)))
	require.Equal(t, turnedHealthy, v.observe(true, t0.Add(9*time.Second)))

	// A worker that never comes up is unhealthy once the start period is over.
	v = newVerdict(h, t0)
	require.Equal(t, unchanged, v.observe(false, t0.Add(9*time.Second)))
	require.Equal(t, unchanged, v.observe(false, t0.Add(10*time.Second)))
	require.Equal(t, turnedUnhealthy, v.observe(false, t0.Add(11*time.Second)))
}

// Against a real worker endpoint: healthy while it answers 200, unhealthy
// within interval × threshold + timeout once it fails, healthy again after.
func TestProbeURL(t *testing.T) {
	var (
		failing atomic.Bool
		passed  atomic.Int32
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		passed.Add(1)
	}))
	t.Cleanup(srv.Close)
	var down, up atomic.Int32
	h := Health{URL: srv.URL + "/healthz", Interval: 50 * time.Millisecond, Timeout: 40 * time.Millisecond, Threshold: 2}
	p := &Probe{Health: h, Unhealthy: func(error) { down.Add(1) }, Healthy: func() { up.Add(1) }}
	go p.Run(t.Context())
	waitFor(t, 5*time.Second, "a first success", func() bool { return passed.Load() > 0 })
	failing.Store(true)
	waitFor(t, 5*time.Second, "unhealthy", func() bool { return down.Load() == 1 })
	failing.Store(false)
	waitFor(t, 5*time.Second, "healthy again", func() bool { return up.Load() == 1 })
	require.Equal(t, int32(1), down.Load(), "one verdict per change")
}

// A dead worker (connection refused) is unhealthy too.
func TestProbeURLRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	var cause atomic.Value
	p := &Probe{Health: Health{URL: url, Interval: 20 * time.Millisecond, Timeout: 20 * time.Millisecond, Threshold: 2, StartPeriod: time.Nanosecond},
		Unhealthy: func(err error) { cause.Store(err) }}
	go p.Run(t.Context())
	waitFor(t, 5*time.Second, "unhealthy", func() bool { return cause.Load() != nil })
	require.ErrorContains(t, cause.Load().(error), "health URL")
}

func TestProbeCommand(t *testing.T) {
	var down atomic.Int32
	p := &Probe{Health: Health{Command: []string{"false"}, Interval: 20 * time.Millisecond, Timeout: 20 * time.Millisecond,
		Threshold: 3, StartPeriod: time.Nanosecond}, Unhealthy: func(error) { down.Add(1) }}
	go p.Run(t.Context())
	waitFor(t, 5*time.Second, "unhealthy", func() bool { return down.Load() == 1 })

	var bad atomic.Int32
	// A timeout far above a fork and exec on a loaded machine: the check
	// must pass, not race the clock.
	ok := &Probe{Health: Health{Command: []string{"true"}, Interval: 10 * time.Millisecond, Timeout: 10 * time.Second,
		Threshold: 1, StartPeriod: time.Nanosecond}, Unhealthy: func(error) { bad.Add(1) }}
	checks := 0
	h := ok.Health
	for range 5 {
		require.NoError(t, ok.check(t.Context(), h, nil))
		checks++
	}
	require.Equal(t, 5, checks)
	require.Zero(t, bad.Load())
}

// A hung command is cut at the timeout and counts as a failure.
func TestProbeCommandTimeout(t *testing.T) {
	p := &Probe{}
	h := Health{Command: []string{"sleep", "5"}, Timeout: 50 * time.Millisecond}
	start := time.Now()
	err := p.check(t.Context(), h, nil)
	require.Error(t, err)
	require.Less(t, time.Since(start), 3*time.Second)
}

func TestHealthConfig(t *testing.T) {
	for _, c := range []struct {
		h    Health
		want string
	}{
		{Health{URL: "http://10.0.0.1:8080/h"}, "must name a loopback address or localhost"},
		{Health{URL: "ftp://127.0.0.1/h"}, "http:// or https:// URL"},
		{Health{URL: "http://127.0.0.1/h", Command: []string{"true"}}, "not both"},
		{Health{Command: []string{""}}, "needs a program"},
		{Health{URL: "http://127.0.0.1/h", Interval: time.Second, Timeout: 2 * time.Second}, "at most Interval"},
	} {
		err := Config{Health: c.h}.Validate()
		require.ErrorIs(t, err, ErrConfig)
		require.ErrorContains(t, err, c.want)
	}
	for _, ok := range []string{"http://127.0.0.1:9/h", "http://localhost:9/h", "http://[::1]:9/h"} {
		require.NoError(t, Config{Health: Health{URL: ok}}.Validate())
	}
	d := Config{}.WithDefaults().Health
	require.LessOrEqual(t, time.Duration(d.Threshold)*d.Interval+d.Timeout, 3*time.Second, "defaults detect a dead worker within ~3 s")
	require.True(t, errors.Is(Config{OnLost: "maybe"}.Validate(), ErrConfig))
	require.ErrorContains(t, Config{Restart: "always"}.Validate(), `Restart must be "never" or "on-failure"`)
}
