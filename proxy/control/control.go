package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence/fenceotel/fasthttptrace"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/leases"
	"github.com/fencepost/fencepost/proxy/reply"
	"github.com/fencepost/fencepost/proxy/workertie"
)

// Settings is what the control API needs of the sidecar's configuration.
type Settings struct {
	ClusterTimeout time.Duration // bound of one cluster call
	Logger         *zap.Logger
	// Attachments ties attach streams to the leases they saw
	// (GET /v1/attach); required.
	Attachments *workertie.Attachments
}

// API is the worker's control API, a route table over the lease keeper
// and the cluster client: acquire, claim, checkpoint, wait, complete,
// fail, give back, the lease view, the event stream, health, readiness
// and metrics. Only the worker in the same pod can call it: it listens on
// loopback (proxy's Config.Validate refuses anything else).
type API struct {
	cfg     Settings
	keeper  *leases.Router
	log     *zap.Logger
	ready   func() (bool, string)
	metrics fasthttp.RequestHandler // nil without a gatherer
	routes  map[string]route
}

// route is one control path: the methods it answers and its handler.
type route struct {
	methods string // "GET" (GET and HEAD), "POST" or "" (any)
	handle  fasthttp.RequestHandler
}

// New builds the control API over the leases of r, whose route also
// names the cluster of each call it makes itself; gatherer serves
// /metrics (none when nil) and ready is the readiness condition.
func New(cfg Settings, r *leases.Router, gatherer prometheus.Gatherer, ready func() (bool, string)) *API {
	ctl := &API{cfg: cfg, keeper: r, log: cfg.Logger.Named("sidecar"), ready: ready}
	if gatherer != nil {
		ctl.metrics = fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	}
	ctl.routes = map[string]route{
		PathHealth:     {"GET", ctl.health},
		PathReady:      {"GET", ctl.readyz},
		PathLease:      {"GET", ctl.lease},
		PathEvents:     {"GET", ctl.stream(false)},
		PathAttach:     {"GET", ctl.stream(true)},
		PathProgress:   {"POST", ctl.progress},
		PathAcquire:    {"POST", ctl.acquire},
		PathClaim:      {"POST", ctl.claim},
		PathCheckpoint: {"POST", ctl.checkpoint},
		PathWait:       {"POST", ctl.wait},
		PathComplete:   {"POST", ctl.release(lease.OutcomeCompleted)},
		PathFail:       {"POST", ctl.release(lease.OutcomeFailed)},
		PathGiveBack:   {"POST", ctl.release(lease.OutcomeGivenBack)},
	}
	if ctl.metrics != nil {
		ctl.routes[PathMetrics] = route{"", ctl.metrics}
	}
	return ctl
}

// Handle adds (or replaces) the route of path: methods is "GET" (GET and
// HEAD), "POST" or "" (any). Call it before the API serves.
func (c *API) Handle(path, methods string, h fasthttp.RequestHandler) {
	c.routes[path] = route{methods, h}
}

// Handler serves the routes named in only (all of them when none is
// named): the metrics address serves only the read-only operational ones.
func (c *API) Handler(only ...string) fasthttp.RequestHandler {
	routes := c.routes
	if len(only) > 0 {
		routes = make(map[string]route, len(only))
		for _, p := range only {
			if r, ok := c.routes[p]; ok {
				routes[p] = r
			}
		}
	}
	// The full API acts with the lease, so controlGuard stands before it;
	// the metrics address serves read-only routes to scrapers off-pod.
	guarded := len(only) == 0
	return func(ctx *fasthttp.RequestCtx) {
		if guarded && !controlGuard(ctx) {
			return
		}
		path := string(ctx.Path())
		r, ok := routes[path]
		switch {
		case !ok:
			reply.Problem(ctx, reply.CodeNotFound, "no such control route", reply.Quote(path), 0)
		case r.methods == "GET" && !ctx.IsGet() && !ctx.IsHead(), r.methods == "POST" && !ctx.IsPost():
			reply.Problem(ctx, reply.CodeMethod, "method not allowed", string(ctx.Method())+" "+path, 0)
		default:
			r.handle(ctx)
		}
	}
}

// decode decodes a JSON body strictly (unknown fields are errors, an
// empty body is {}) and answers 400 itself, naming the field, on failure.
func decode(ctx *fasthttp.RequestCtx, v any) bool {
	body := bytes.TrimSpace(ctx.PostBody())
	if len(body) == 0 {
		return true
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		reply.Problem(ctx, reply.CodeBadRequest, "bad JSON body", decodeError(err), 0)
		return false
	}
	if dec.More() {
		reply.Problem(ctx, reply.CodeBadRequest, "bad JSON body", "trailing data after the JSON value", 0)
		return false
	}
	return true
}

// decodeError words a JSON decoding error for the worker: the field and
// what it should hold, or where the syntax broke.
func decodeError(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te) && te.Field == "":
		return fmt.Sprintf("the body must be a JSON object, got JSON %s", te.Value)
	case errors.As(err, &te):
		return fmt.Sprintf("field %q: must be a JSON %s, got JSON %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
	case errors.As(err, &se):
		return fmt.Sprintf("malformed JSON at byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the JSON body ends early"
	}
	// Unknown fields: "json: unknown field \"x\"" already names it.
	return strings.TrimPrefix(err.Error(), "json: ")
}

// jsonKind names a Go kind as the JSON type that decodes into it.
func jsonKind(k string) string {
	switch {
	case strings.HasPrefix(k, "int"), strings.HasPrefix(k, "uint"), strings.HasPrefix(k, "float"):
		return "number (" + k + ")"
	case k == "bool":
		return "boolean"
	case k == "struct", k == "map":
		return "object"
	case k == "slice":
		return "array"
	}
	return k
}

// callCtx bounds the cluster call a control call makes. The worker's
// traceparent, when its control call has one, rides on: the
// sidecar's span of the cluster call it makes (proxytrace.ClusterHook) is
// then a child of the worker's span.
func (c *API) callCtx(rc *fasthttp.RequestCtx) (context.Context, context.CancelFunc) {
	return context.WithTimeout(fasthttptrace.Extract(context.Background(), &rc.Request.Header), c.cfg.ClusterTimeout)
}

// controlError answers a failed control call. When the cluster says the
// caller's epoch is no longer the holder's, the local lease is dropped at
// once: the cluster knows better than the local deadline.
func (c *API) controlError(ctx *fasthttp.RequestCtx, task string, epoch uint64, err error) {
	c.keeper.LostByCluster(task, epoch, err)
	switch {
	case errors.Is(err, leases.ErrNoSession):
		reply.Problem(ctx, reply.CodeNoSession, "no cluster session yet", "retry shortly", 0)
	case errors.Is(err, leases.ErrNoLease):
		reply.Problem(ctx, reply.CodeNoLease, "no lease held", fmt.Sprintf("the sidecar holds no lease for task %q", task), 0)
	case errors.Is(err, leases.ErrAmbiguousTask):
		tasks := c.keeper.TaskIDs()
		reply.Send(ctx, &reply.Reply{Code: reply.CodeAmbiguousTask, Title: "several leases held",
			Detail: fmt.Sprintf("the sidecar holds leases on %d tasks %q: name one with taskId", len(tasks), tasks), Tasks: tasks})
	case errors.Is(err, context.DeadlineExceeded):
		reply.Problem(ctx, reply.CodeClusterTimeout, "cluster call timed out", err.Error(), 0)
	default:
		// A model error answers with the model table's status and code,
		// exactly as the cluster API would.
		if info, ok := lease.LookupError(err); ok {
			ep := uint64(0)
			if info.Status == fasthttp.StatusConflict {
				ep = epoch
			}
			reply.Problem(ctx, info.Code, strings.ToLower(fasthttp.StatusMessage(info.Status)), err.Error(), ep)
			return
		}
		c.log.Warn("control call failed", zap.Error(err))
		reply.Problem(ctx, reply.CodeClusterError, "cluster call failed", err.Error(), 0)
	}
}
