package leases

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence/api"
)

// A write the sidecar blocks never reaches the cluster or a fenced
// service, so without a word from the sidecar the task's history (the
// console's timeline) cannot show it. The keeper reports such blocks to
// the cluster (POST PathTaskBlocked), coalesced per task: the first call
// of a burst is named, with its trace id, and the rest are counted, so an
// agent retrying a blocked write in a loop costs the cluster at most one
// small entry per task per blockReportEvery. Reports are best effort: a
// lost one costs a timeline line, never a lease or a write.

// Blocked is one call the request path blocked for want of a current
// lease. Method and URL (host and path, never the query) name it;
// TraceID is its span's trace id, "" when untraced.
type Blocked struct {
	TaskID  string
	Epoch   uint64
	Reason  Reason
	Method  string
	URL     string
	TraceID string
}

const (
	// blockReportEvery spaces one task's reports.
	blockReportEvery = time.Second
	// maxPendingReports bounds the tasks with a report waiting; a block
	// for another task past it is counted in the metric only.
	maxPendingReports = 256
	// blockReportTimeout bounds one report's call.
	blockReportTimeout = 5 * time.Second
)

// blockReporter is the optional Cluster method reports go through
// (*cluster.Client has it).
type blockReporter interface {
	ReportBlocked(ctx context.Context, taskID string, r api.BlockedReport) error
}

// blockReports holds the reports waiting for the report loop.
type blockReports struct {
	mu      sync.Mutex
	pending map[string]*api.BlockedReport // by task
	order   []string                      // tasks in the order first blocked
	wake    chan struct{}
}

// ReportBlocked records a blocked call for the task's next report. A
// block with no lease ever held (epoch 0) names nothing the cluster could
// attribute and is not reported. It never blocks the request path.
func (k *Keeper) ReportBlocked(b Blocked) {
	if b.TaskID == "" || b.Epoch == 0 {
		return
	}
	if _, ok := k.cluster.(blockReporter); !ok || k.reportsOff.Load() {
		return
	}
	sid := k.SessionID()
	if sid == "" {
		return
	}
	br := &k.reports
	br.mu.Lock()
	defer br.mu.Unlock()
	if r := br.pending[b.TaskID]; r != nil && r.Epoch == b.Epoch && r.SessionID == sid {
		r.Count++
		return
	}
	if br.pending == nil {
		br.pending = map[string]*api.BlockedReport{}
	}
	if _, ok := br.pending[b.TaskID]; !ok {
		if len(br.pending) >= maxPendingReports {
			k.metrics.blockReports.WithLabelValues("dropped").Inc()
			return
		}
		br.order = append(br.order, b.TaskID)
	}
	// A block under a newer epoch replaces an unsent one of an older.
	br.pending[b.TaskID] = &api.BlockedReport{SessionID: sid, Epoch: b.Epoch, Reason: string(b.Reason),
		Method: method(b.Method), URL: printable(b.URL, api.MaxBlockedURL), TraceID: b.TraceID, Count: 1}
	ring(br.wake)
}

// method is m when the report's rule allows it (api.BlockedReport.Check:
// an uppercase token), else "": an odd method loses its name, not the
// report.
func method(m string) string {
	if len(m) > api.MaxBlockedMethod {
		return ""
	}
	for i := 0; i < len(m); i++ {
		if m[i] < 'A' || m[i] > 'Z' {
			return ""
		}
	}
	return m
}

// printable is s with every byte outside printable ASCII %-escaped (a
// path arrives decoded and may hold anything), cut to n bytes.
func printable(s string, n int) string {
	const hex = "0123456789ABCDEF"
	out := make([]byte, 0, min(len(s), n))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c > ' ' && c <= '~' {
			if len(out)+1 > n {
				break
			}
			out = append(out, c)
			continue
		}
		if len(out)+3 > n {
			break
		}
		out = append(out, '%', hex[c>>4], hex[c&15])
	}
	return string(out)
}

// take removes and returns the waiting reports, oldest task first.
func (br *blockReports) take() ([]string, []*api.BlockedReport) {
	br.mu.Lock()
	defer br.mu.Unlock()
	tasks, out := br.order, make([]*api.BlockedReport, len(br.order))
	for i, t := range tasks {
		out[i] = br.pending[t]
	}
	br.order, br.pending = nil, nil
	return tasks, out
}

// runBlockReports sends the waiting reports whenever there are some, at
// most once per blockReportEvery, until ctx ends or the cluster says it
// takes none (an earlier release).
func (k *Keeper) runBlockReports(ctx context.Context, c blockReporter) {
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
			return
		case <-k.reports.wake:
		}
		tasks, reports := k.reports.take()
		for i, task := range tasks {
			rctx, cancel := context.WithTimeout(ctx, blockReportTimeout)
			err := c.ReportBlocked(rctx, task, *reports[i])
			cancel()
			switch {
			case err == nil:
				k.metrics.blockReports.WithLabelValues("sent").Inc()
			case errors.Is(err, errors.ErrUnsupported):
				k.reportsOff.Store(true)
				k.log.Info("the cluster keeps no reports of blocked writes (an earlier release); not reporting them", zap.Error(err))
				return
			default:
				k.metrics.blockReports.WithLabelValues("failed").Inc()
				if ce := k.log.Check(zap.DebugLevel, "report of blocked writes failed"); ce != nil {
					ce.Write(zap.String("task", task), zap.Uint64("epoch", reports[i].Epoch), zap.Error(err))
				}
			}
		}
		k.sleep(ctx, blockReportEvery, nil)
	}
}
