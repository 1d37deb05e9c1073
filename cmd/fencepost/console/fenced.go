package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/fencepost/fencepost/config"
	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/fence/refsvc"
)

// Bounds of reading a fenced service's log for one Task page.
const (
	fencedLogBytes   = 4 << 20
	fencedLogTimeout = time.Second
	fencedLogEntries = 50 // the newest per task
)

// fencedWrites returns the newest writes the fenced service at
// Config.FencedLogURL accepted and refused for task, as timeline events; nothing when
// no log is configured or it cannot be read (the page says so).
func (s *Server) fencedWrites(ctx context.Context, task string) ([]timelineEvent, error) {
	if s.cfg.FencedLogURL == "" {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, fencedLogTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.cfg.FencedLogURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.cfg.MetricsClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fenced log: %s", resp.Status)
	}
	var log refsvc.LogPage
	if err := json.NewDecoder(io.LimitReader(resp.Body, fencedLogBytes)).Decode(&log); err != nil {
		return nil, fmt.Errorf("fenced log: %w", err)
	}
	all := log.Entries
	var out []timelineEvent
	for i := len(all) - 1; i >= 0 && len(out) < fencedLogEntries; i-- {
		e := all[i]
		if e.Task != task {
			continue
		}
		out = append(out, timelineEvent{at: e.At, Time: e.At.UTC().Format(time.RFC3339Nano), When: e.At.UTC().Format("15:04:05.000"),
			Kind: "fenced write", Epoch: e.Epoch, Class: "good",
			Detail: fmt.Sprintf("accepted downstream from %s, %d bytes, key %s", e.Holder, e.BodyLen, e.IdempotencyKey)})
	}
	for i, n := len(log.Refused)-1, 0; i >= 0 && n < fencedLogEntries; i-- {
		r := log.Refused[i]
		if r.Task != task {
			continue
		}
		n++
		out = append(out, s.withTrace(timelineEvent{at: r.At, Time: r.At.UTC().Format(time.RFC3339Nano), When: r.At.UTC().Format("15:04:05.000"),
			Kind: "refused downstream", Epoch: r.Epoch, Class: "bad", Detail: refusalDetail(r)}, r.TraceID))
	}
	return out, nil
}

// refusalDetail says why the fenced service refused a write, for people.
func refusalDetail(r refsvc.Refusal) string {
	d := fmt.Sprintf("%s (%d)", (&fence.Problem{Type: r.Type}).Reason(), r.Status)
	if r.MaxSeenEpoch != 0 {
		d += fmt.Sprintf(": the service has seen epoch %d", r.MaxSeenEpoch)
	}
	if r.Holder != "" {
		d += " from " + r.Holder
	}
	if r.IdempotencyKey != "" {
		d += ", key " + r.IdempotencyKey
	}
	return d
}

// withTrace sets the event's trace id and, with Config.TraceURL, its link.
func (s *Server) withTrace(e timelineEvent, traceID string) timelineEvent {
	e.TraceID = traceID
	if traceID != "" && s.cfg.TraceURL != "" {
		e.TraceLink = config.TraceURL(s.cfg.TraceURL, traceID)
	}
	return e
}
