package console

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// series are the seed's five operating metrics (DESIGN.md 9), each a sum
// of counters read from the configured /metrics pages. A series' value in
// a minute is the increase of its counters during that minute.
type series struct {
	Key, Title, Unit string
	// counters are the sample names (with a label filter when set) summed.
	counters []sample
}

type sample struct {
	name  string
	label string // "key=\"value\"" a sample must carry, "" for any
}

var healthSeries = []series{
	{Key: "expired", Title: "Lease expiries", Unit: "leases",
		counters: []sample{{name: "fencepost_cluster_lease_expired_total"}}},
	{Key: "reclaimed", Title: "Reclaims", Unit: "leases",
		counters: []sample{{name: "fencepost_cluster_lease_reclaimed_total"}}},
	{Key: "resumed", Title: "Resumes after reclaim", Unit: "grants",
		counters: []sample{{name: "fencepost_cluster_resume_success_total"}}},
	{Key: "fencing", Title: "Fencing rejects", Unit: "writes",
		counters: []sample{
			{name: "fencepost_cluster_apply_errors_total", label: `code="stale_epoch"`},
			{name: "fencepost_sidecar_writes_blocked_total"},
			{name: "fencepost_refsvc_writes_stale_rejected_total"},
		}},
	{Key: "waiting", Title: "Time spent waiting", Unit: "s",
		counters: []sample{{name: "fencepost_cluster_paused_waiting_seconds_sum"}}},
	{Key: "alarms", Title: "Double-execution alarms", Unit: "alarms",
		counters: []sample{{name: "fencepost_cluster_double_execution_alarms_total"}}},
}

// window is how many minutes the Health page shows.
const window = 60

// ring holds per-minute increases of every series for the last window
// minutes, from scrapes of the counters' totals.
type ring struct {
	mu      sync.Mutex
	minutes [window]int64 // the unix minute each slot holds
	values  [window]map[string]float64
	last    map[string]float64 // last total per series and URL
	scrapes int
	lastErr string
}

func newRing() *ring {
	r := &ring{last: map[string]float64{}}
	for i := range r.values {
		r.values[i] = map[string]float64{}
	}
	return r
}

// add records the totals read from one URL at now.
func (r *ring) add(now time.Time, url string, totals map[string]float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := now.Unix() / 60
	slot := int(m % window)
	if r.minutes[slot] != m {
		r.minutes[slot], r.values[slot] = m, map[string]float64{}
	}
	for key, v := range totals {
		k := url + "\x00" + key
		prev, seen := r.last[k]
		r.last[k] = v
		switch {
		case !seen:
			continue // the first reading is the baseline
		case v < prev:
			r.values[slot][key] += v // the process restarted: its counter began again
		default:
			r.values[slot][key] += v - prev
		}
	}
}

// point is one minute of one series.
type point struct {
	Minute time.Time
	Value  float64
}

// last returns the window's minutes ending at now, oldest first.
func (r *ring) lastHour(now time.Time, key string) []point {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]point, window)
	end := now.Unix() / 60
	for i := range window {
		m := end - int64(window-1-i)
		slot := int(m % window)
		out[i].Minute = time.Unix(m*60, 0)
		if r.minutes[slot] == m {
			out[i].Value = r.values[slot][key]
		}
	}
	return out
}

// totals sums each series over the samples of one exposition.
func totals(body io.Reader) map[string]float64 {
	out := map[string]float64{}
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		sp := bytes.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		v, err := strconv.ParseFloat(string(line[sp+1:]), 64)
		if err != nil {
			continue
		}
		name, labels := string(line[:sp]), ""
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name, labels = name[:i], name[i:]
		}
		for _, s := range healthSeries {
			for _, c := range s.counters {
				if c.name == name && (c.label == "" || strings.Contains(labels, c.label)) {
					out[s.Key] += v
				}
			}
		}
	}
	return out
}

// scrape reads every URL once into the ring.
func (s *Server) scrape(ctx context.Context) {
	for _, u := range s.cfg.MetricsURLs {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			continue
		}
		resp, err := s.cfg.MetricsClient.Do(req)
		if err != nil {
			s.metrics.fail(err.Error())
			continue
		}
		t := totals(io.LimitReader(resp.Body, 8<<20))
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			s.metrics.fail(u + ": " + resp.Status)
			continue
		}
		s.metrics.add(s.cfg.Now(), u, t)
		s.metrics.mu.Lock()
		s.metrics.scrapes++
		s.metrics.mu.Unlock()
	}
}

func (r *ring) fail(msg string) {
	r.mu.Lock()
	r.lastErr = msg
	r.mu.Unlock()
}

// scrapeLoop scrapes every ScrapeEvery until ctx ends.
func (s *Server) scrapeLoop(ctx context.Context) {
	if len(s.cfg.MetricsURLs) == 0 {
		return
	}
	t := time.NewTicker(ScrapeEvery)
	defer t.Stop()
	for {
		s.scrape(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if ce := s.log.Check(zap.DebugLevel, "console: scraped"); ce != nil {
			ce.Write(zap.Int("urls", len(s.cfg.MetricsURLs)))
		}
	}
}
