package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

// Control API routes.
const (
	PathAcquire    = "/v1/acquire"
	PathClaim      = "/v1/claim"
	PathCheckpoint = "/v1/checkpoint"
	PathWait       = "/v1/wait"
	PathComplete   = "/v1/complete"
	PathFail       = "/v1/fail"
	PathGiveBack   = "/v1/giveback"
	PathLease      = "/v1/lease"
	PathEvents     = "/v1/events"
	PathHealth     = "/healthz"
	PathReady      = "/readyz"
	PathMetrics    = "/metrics"
)

// maxControlBody bounds a control request (checkpoint data included).
const maxControlBody = 4 << 20

// AcquireRequest is the body of POST /v1/acquire.
type AcquireRequest struct {
	TaskID   string `json:"taskId"`
	Create   bool   `json:"create,omitempty"`
	Profile  string `json:"profile,omitempty"`
	Priority int    `json:"priority,omitempty"`
}

// GrantReply is the reply to acquire and claim: the local lease view, the
// task with its latest checkpoint, and effects an earlier owner left in
// doubt.
type GrantReply struct {
	Lease   LeaseView       `json:"lease"`
	Task    lease.Task      `json:"task"`
	InDoubt []*lease.Effect `json:"inDoubt,omitempty"`
}

// CheckpointRequest is the body of POST /v1/checkpoint. TaskID may be
// omitted when one lease is held; Seq 0 means "the next one".
type CheckpointRequest struct {
	TaskID string `json:"taskId,omitempty"`
	Seq    uint64 `json:"seq,omitempty"`
	Step   string `json:"step,omitempty"`
	Data   []byte `json:"data,omitempty"`
}

// WaitRequest is the body of POST /v1/wait.
type WaitRequest struct {
	TaskID    string `json:"taskId,omitempty"`
	TimeoutMs int64  `json:"timeoutMs,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// ReleaseRequest is the body of POST /v1/complete, /v1/fail and
// /v1/giveback.
type ReleaseRequest struct {
	TaskID string `json:"taskId,omitempty"`
	Result []byte `json:"result,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// LeaseReply is the reply to GET /v1/lease.
type LeaseReply struct {
	Leases []LeaseView `json:"leases"`
}

func (s *Sidecar) newControlServer() *fasthttp.Server {
	var metricsHandler fasthttp.RequestHandler
	if s.gatherer != nil {
		metricsHandler = fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(s.gatherer, promhttp.HandlerOpts{}))
	}
	return &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			if !controlGuard(ctx) {
				return
			}
			if string(ctx.Path()) == PathMetrics && metricsHandler != nil {
				metricsHandler(ctx)
				return
			}
			s.handleControl(ctx)
		},
		Name:               "fencepost-sidecar",
		MaxRequestBodySize: maxControlBody,
		ReadTimeout:        s.cfg.ReadTimeout,
		IdleTimeout:        s.cfg.IdleTimeout,
		CloseOnShutdown:    true,
		Logger:             fastLogger{s.log},
	}
}

// newMetricsServer serves the read-only operational routes on
// Config.MetricsAddr: nothing there can change a lease.
func (s *Sidecar) newMetricsServer() *fasthttp.Server {
	var metricsHandler fasthttp.RequestHandler
	if s.gatherer != nil {
		metricsHandler = fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(s.gatherer, promhttp.HandlerOpts{}))
	}
	return &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			switch path := string(ctx.Path()); {
			case path == PathMetrics && metricsHandler != nil:
				metricsHandler(ctx)
			case (path == PathHealth || path == PathReady) && (ctx.IsGet() || ctx.IsHead()):
				s.handleControl(ctx)
			default:
				ctx.SetStatusCode(fasthttp.StatusNotFound)
				ctx.SetBodyString("only /metrics, /healthz and /readyz are served here\n")
			}
		},
		Name:            "fencepost-sidecar-metrics",
		ReadTimeout:     s.cfg.ReadTimeout,
		IdleTimeout:     s.cfg.IdleTimeout,
		CloseOnShutdown: true,
		Logger:          fastLogger{s.log},
	}
}

func (s *Sidecar) handleControl(ctx *fasthttp.RequestCtx) {
	path, post := string(ctx.Path()), ctx.IsPost()
	get := ctx.IsGet() || ctx.IsHead()
	switch {
	case path == PathHealth && get:
		ctx.SetContentType("text/plain")
		ctx.SetBodyString("ok\n")
	case path == PathReady && get:
		ok, why := s.ready()
		if !ok {
			ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		}
		ctx.SetContentType("text/plain")
		ctx.SetBodyString(why + "\n")
	case path == PathLease && get:
		v := s.leases.views(s.clock.Now())
		if t := string(ctx.QueryArgs().Peek("taskId")); t != "" {
			var only []LeaseView
			for _, x := range v {
				if x.TaskID == t {
					only = append(only, x)
				}
			}
			v = only
		}
		if v == nil {
			v = []LeaseView{}
		}
		writeJSON(ctx, LeaseReply{Leases: v})
	case path == PathEvents && get:
		s.serveEvents(ctx)
	case path == PathAcquire && post:
		var req AcquireRequest
		if s.decodeControl(ctx, &req) {
			s.replyGrant(ctx, req.TaskID, false, api.AcquireRequest{Create: req.Create, Profile: req.Profile, Priority: req.Priority})
		}
	case path == PathClaim && post:
		var req struct{}
		if s.decodeControl(ctx, &req) {
			s.replyGrant(ctx, "", true, api.AcquireRequest{})
		}
	case path == PathCheckpoint && post:
		var req CheckpointRequest
		if s.decodeControl(ctx, &req) {
			s.checkpoint(ctx, req)
		}
	case path == PathWait && post:
		var req WaitRequest
		if s.decodeControl(ctx, &req) {
			s.wait(ctx, req)
		}
	case (path == PathComplete || path == PathFail || path == PathGiveBack) && post:
		var req ReleaseRequest
		if s.decodeControl(ctx, &req) {
			out := map[string]lease.Outcome{PathComplete: lease.OutcomeCompleted, PathFail: lease.OutcomeFailed, PathGiveBack: lease.OutcomeGivenBack}[path]
			s.release(ctx, req, out)
		}
	case path == PathHealth || path == PathReady || path == PathLease || path == PathEvents || path == PathAcquire ||
		path == PathClaim || path == PathCheckpoint || path == PathWait || path == PathComplete || path == PathFail || path == PathGiveBack:
		writeProblem(ctx, fasthttp.StatusMethodNotAllowed, CodeMethod, "method not allowed", string(ctx.Method())+" "+path, 0)
	default:
		writeProblem(ctx, fasthttp.StatusNotFound, CodeNotFound, "no such control route", quoteBounded(path), 0)
	}
}

// decodeControl decodes a JSON body strictly (unknown fields are errors,
// an empty body is {}) and answers 400 itself on failure.
func (s *Sidecar) decodeControl(ctx *fasthttp.RequestCtx, v any) bool {
	body := bytes.TrimSpace(ctx.PostBody())
	if len(body) == 0 {
		return true
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeProblem(ctx, fasthttp.StatusBadRequest, CodeBadRequest, "bad JSON body", err.Error(), 0)
		return false
	}
	if dec.More() {
		writeProblem(ctx, fasthttp.StatusBadRequest, CodeBadRequest, "bad JSON body", "trailing data after the JSON value", 0)
		return false
	}
	return true
}

func writeJSON(ctx *fasthttp.RequestCtx, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeProblem(ctx, fasthttp.StatusInternalServerError, "internal", "cannot encode reply", err.Error(), 0)
		return
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

func (s *Sidecar) callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.cfg.ClusterTimeout)
}

func (s *Sidecar) replyGrant(ctx *fasthttp.RequestCtx, taskID string, claim bool, req api.AcquireRequest) {
	if !claim && taskID == "" {
		writeProblem(ctx, fasthttp.StatusBadRequest, CodeBadRequest, "taskId is required", "", 0)
		return
	}
	cctx, cancel := s.callCtx()
	defer cancel()
	g, err := s.acquire(cctx, taskID, claim, req)
	if err != nil {
		s.controlError(ctx, "", 0, err)
		return
	}
	id := g.Lease.TaskID
	if id == "" {
		id = g.Task.ID
	}
	reply := GrantReply{Task: g.Task, InDoubt: g.InDoubt}
	for _, v := range s.leases.views(s.clock.Now()) {
		if v.TaskID == id {
			reply.Lease = v
		}
	}
	writeJSON(ctx, reply)
}

func (s *Sidecar) checkpoint(ctx *fasthttp.RequestCtx, req CheckpointRequest) {
	task, epoch, err := s.leases.resolve(req.TaskID)
	if err != nil {
		s.controlError(ctx, task, 0, err)
		return
	}
	cctx, cancel := s.callCtx()
	defer cancel()
	t, err := s.cluster.Checkpoint(cctx, task, api.CheckpointRequest{
		SessionID: s.sessionID(), Epoch: epoch, Seq: req.Seq, Step: req.Step, Data: req.Data,
	})
	if err != nil {
		s.controlError(ctx, task, epoch, err)
		return
	}
	if t != nil && t.Checkpoint != nil {
		s.leases.checkpointed(task, epoch, t.Checkpoint.Seq, t.Checkpoint.Step)
	}
	writeJSON(ctx, t)
}

func (s *Sidecar) wait(ctx *fasthttp.RequestCtx, req WaitRequest) {
	task, epoch, err := s.leases.resolve(req.TaskID)
	if err != nil {
		s.controlError(ctx, task, 0, err)
		return
	}
	s.holdLease(task, epoch, reasonWaiting)
	cctx, cancel := s.callCtx()
	defer cancel()
	t, err := s.cluster.Wait(cctx, task, api.WaitRequest{
		SessionID: s.sessionID(), Epoch: epoch, TimeoutMs: req.TimeoutMs, Reason: req.Reason,
	})
	if err != nil {
		s.leases.unhold(task, epoch, s.clock.Now())
		s.controlError(ctx, task, epoch, err)
		return
	}
	s.dropLease(task, epoch, reasonWaiting, EventReleased, "waiting")
	writeJSON(ctx, t)
}

func (s *Sidecar) release(ctx *fasthttp.RequestCtx, req ReleaseRequest, out lease.Outcome) {
	task, epoch, err := s.leases.resolve(req.TaskID)
	if err != nil {
		s.controlError(ctx, task, 0, err)
		return
	}
	// Block writes before the release commits: after it nobody may write
	// under this epoch, and a write racing the release must not slip out.
	s.holdLease(task, epoch, reasonReleased)
	cctx, cancel := s.callCtx()
	defer cancel()
	t, err := s.cluster.Release(cctx, task, api.ReleaseRequest{
		SessionID: s.sessionID(), Epoch: epoch, Outcome: out, Result: req.Result, Reason: req.Reason,
	})
	if err != nil {
		s.leases.unhold(task, epoch, s.clock.Now())
		s.controlError(ctx, task, epoch, err)
		return
	}
	s.dropLease(task, epoch, reasonReleased, EventReleased, string(out))
	writeJSON(ctx, t)
}

// holdLease blocks a lease's writes and cuts what is in flight while the
// worker ends it.
func (s *Sidecar) holdLease(task string, epoch uint64, r reason) {
	if g, ok := s.leases.hold(task, epoch, r); ok {
		s.cut(g)
	}
}

// controlError answers a failed control call. When the cluster says the
// caller's epoch is no longer the holder's, the local lease is dropped at
// once: the cluster knows better than the local deadline.
func (s *Sidecar) controlError(ctx *fasthttp.RequestCtx, task string, epoch uint64, err error) {
	if task != "" && epoch != 0 && (errors.Is(err, lease.ErrStaleEpoch) || errors.Is(err, lease.ErrNotHolder) || errors.Is(err, lease.ErrLeaseNotActive)) {
		s.dropLease(task, epoch, reasonLost, EventLost, err.Error())
	}
	switch {
	case errors.Is(err, ErrNoSession):
		writeProblem(ctx, fasthttp.StatusServiceUnavailable, CodeNoSession, "no cluster session yet", "retry shortly", 0)
	case errors.Is(err, ErrNoLease):
		writeProblem(ctx, fasthttp.StatusConflict, CodeNoLease, "no lease held", fmt.Sprintf("the sidecar holds no lease for task %q", task), 0)
	case errors.Is(err, ErrAmbiguousTask):
		writeProblem(ctx, fasthttp.StatusConflict, CodeAmbiguousTask, "several leases held", "name the task with taskId", 0)
	case errors.Is(err, context.DeadlineExceeded):
		writeProblem(ctx, fasthttp.StatusGatewayTimeout, CodeClusterError, "cluster call timed out", err.Error(), 0)
	default:
		// A model error answers with the model table's status and code,
		// exactly as the cluster API would.
		if info, ok := lease.LookupError(err); ok {
			ep := uint64(0)
			if info.Status == fasthttp.StatusConflict {
				ep = epoch
			}
			writeProblem(ctx, info.Status, info.Code, strings.ToLower(fasthttp.StatusMessage(info.Status)), err.Error(), ep)
			return
		}
		s.log.Warn("control call failed", zap.Error(err))
		writeProblem(ctx, fasthttp.StatusBadGateway, CodeClusterError, "cluster call failed", err.Error(), 0)
	}
}

// sseKeepAlive is how often an idle event stream gets a comment line, so
// a dead client is noticed and proxies do not time the stream out.
const sseKeepAlive = 15 * time.Second

// serveEvents streams lease events as Server-Sent Events.
func (s *Sidecar) serveEvents(ctx *fasthttp.RequestCtx) {
	ch, cancel := s.events.subscribe()
	ctx.SetContentType("text/event-stream")
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		defer cancel()
		t := time.NewTicker(sseKeepAlive)
		defer t.Stop()
		if _, err := w.WriteString(": fencepost lease events\n\n"); err != nil || w.Flush() != nil {
			return
		}
		for {
			select {
			case ev, ok := <-ch:
				if !ok {
					return
				}
				b, _ := json.Marshal(ev)
				fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.Kind, b)
			case <-t.C:
				_, _ = w.WriteString(": keep-alive\n\n")
			}
			if err := w.Flush(); err != nil {
				return
			}
		}
	})
}
