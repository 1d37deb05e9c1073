// Package httpapi is the lease cluster's HTTP API: every /v1 route of
// fence/api served over fasthttp, JSON in and out, errors as problem+json.
//
// The server is a thin shell over a Store (the real one is *raftstore.Store):
// it decodes strictly, validates ids, calls one Store method and maps the
// error in one table (problems.go). A follower never answers not_leader:
// when the Store says ErrNotLeader the request is forwarded to the leader
// and the leader's answer relayed (forward.go), so a client may talk to any
// member. /healthz, /readyz and /metrics sit beside the API.
package httpapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/fenceotel"
	"github.com/fencepost/fencepost/fence/fenceotel/fasthttptrace"
	"github.com/fencepost/fencepost/fence/pki"
	"github.com/fencepost/fencepost/raftstore"
)

// Defaults applied to zero Config fields.
const (
	DefaultMaxBodyBytes = 2 << 20
	// DefaultBodyBudget bounds the request bodies all callers have in
	// processing at once (Config.BodyBudget): 32 bodies of the largest
	// size. Each identity may use a quarter of it.
	DefaultBodyBudget     = 32 * DefaultMaxBodyBytes
	DefaultReadTimeout    = 10 * time.Second
	DefaultWriteTimeout   = 10 * time.Second
	DefaultIdleTimeout    = 60 * time.Second
	DefaultForwardTimeout = 5 * time.Second
	DefaultRequestTimeout = 5 * time.Second
	DefaultShutdownWait   = 5 * time.Second
)

// New builds a Server for store; Start makes it listen.
func New(cfg Config, store Store) (*Server, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: store is nil", ErrConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, store: store, log: cfg.Logger, routes: buildRoutes(),
		auditLog: cfg.AuditLogger, bodyReaders: map[string]bool{},
		limiter: newLimiter(cfg.RatePerIdentity, cfg.RateBurst, time.Now), refusals: newRefusalLimiter(time.Now)}
	s.denials = newDenials(s.auditLog, time.Now)
	s.bodies = newBodyBudget(int64(cfg.BodyBudget))
	for _, n := range cfg.BodyReaders {
		s.bodyReaders[n] = true
	}
	if cfg.Pprof {
		s.pprof = pprofHandler()
	}
	if cfg.TracerProvider != nil {
		s.tracer = cfg.TracerProvider.Tracer(tracerName)
	}
	s.readCtx, s.stopReads = context.WithCancel(context.Background())
	s.metrics = newHTTPMetrics(cfg.Gatherer)
	s.fwd = newForwardClient(cfg)
	s.srv = &fasthttp.Server{
		Handler:               s.serve,
		ErrorHandler:          s.serveError,
		Name:                  "fencepost",
		NoDefaultServerHeader: true,
		ReadBufferSize:        16 << 10, // headers; large enough for long escaped ids
		WriteBufferSize:       16 << 10,
		MaxRequestBodySize:    cfg.MaxBodyBytes,
		ReadTimeout:           cfg.ReadTimeout,
		WriteTimeout:          cfg.WriteTimeout,
		IdleTimeout:           cfg.IdleTimeout,
		// The API never uses multipart forms; parsing them is wasted work.
		DisablePreParseMultipartForm: true,
		Logger:                       fasthttpLogger{cfg.Logger},
	}
	return s, nil
}

// Start listens on Config.Addr and serves in the background.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return fmt.Errorf("httpapi: already started on %s", s.ln.Addr())
	}
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("httpapi: listen %s: %w", s.cfg.Addr, err)
	}
	if s.cfg.TLS != nil {
		ln = tls.NewListener(ln, s.cfg.TLS.ServerConfig(pki.ClientAuth))
	} else {
		s.log.Warn("cluster API is PLAIN HTTP: callers are not authenticated and traffic is not encrypted; every caller is the dev identity with every permission (loopback development only)",
			zap.String("addr", ln.Addr().String()), zap.Stringer("identity", DevIdentity))
	}
	s.ln = ln
	s.served = make(chan struct{})
	s.denials.start()
	go func() {
		defer close(s.served)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, net.ErrClosed) {
			s.log.Error("http server stopped", zap.Error(err))
		}
	}()
	s.log.Info("http api listening", zap.String("addr", ln.Addr().String()), zap.Bool("tls", s.cfg.TLS != nil))
	return nil
}

// Addr returns the bound address ("host:port"), "" before Start.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Close stops accepting connections, waits up to Config.ShutdownWait for
// requests in flight, and closes the forwarding client's connections.
func (s *Server) Close() error {
	s.mu.Lock()
	ln, served := s.ln, s.served
	s.mu.Unlock()
	if ln == nil {
		return nil
	}
	s.stopReads()
	// Streams first: fasthttp's shutdown waits for hijacked connections
	// too, and a stream ends only when its connection does.
	s.closeStreams()
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownWait)
	defer cancel()
	err := s.srv.ShutdownWithContext(ctx)
	// Shutdown only closes listeners Serve has registered; a Close racing
	// a fresh Start would otherwise leave Serve accepting forever.
	_ = ln.Close()
	<-served
	s.denials.close()
	s.fwd.CloseIdleConnections()
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("httpapi: shutdown: %w", err)
	}
	return nil
}

// call is one API request as the handlers see it. Nothing in it may be
// kept after the handler returns: rc and its buffers are reused by fasthttp.
type call struct {
	who   principal
	ctx   context.Context
	rc    *fasthttp.RequestCtx
	rid   string
	p     params
	query map[string]string
}

// decode strictly decodes the request body into v.
func (c *call) decode(v any) error {
	return decodeBody(c.rc.PostBody(), v)
}

// noBody refuses a body on routes that take none (DELETE).
func (c *call) noBody() error {
	if len(c.rc.PostBody()) > 0 {
		return fmt.Errorf("%w: this route takes no body", ErrBadRequest)
	}
	return nil
}

// serve is the fasthttp handler: route, call, answer, measure, log.
func (s *Server) serve(rc *fasthttp.RequestCtx) {
	if s.pprof != nil && bytes.HasPrefix(rc.Path(), pprofPrefix) {
		// Profiles expose internals: operators only.
		who, err := s.identify(rc)
		if err == nil {
			err = who.require(PermProfile)
		}
		if err != nil {
			writeProblem(rc, problemFor(err, string(rc.Path())))
			s.audit(context.Background(), who, PermProfile, rc, "pprof", "", err)
			return
		}
		s.pprof(rc)
		return
	}
	start := time.Now()
	rid, ridErr := requestID(rc)
	rc.Response.Header.Set(api.HeaderRequestID, rid)
	template := "unmatched"
	forwarded := false
	r, p, err := match(s.routes, string(rc.URI().PathOriginal()))
	switch {
	case ridErr != nil:
		err = ridErr
	case r == nil && err == nil:
		err = fmt.Errorf("%w: %s", ErrNoRoute, rc.Path())
	}
	if r != nil {
		template = r.template
	}
	var (
		who  principal
		perm Permission
		// tc is the request's trace context: its server span when
		// tracing is on and the route is an API one, else Background.
		tc   = context.Background()
		span trace.Span
	)
	if err == nil {
		ep, ok := r.methods[string(rc.Method())]
		if ok && ep.raw == nil && ep.upgrade == nil && s.tracer != nil {
			tc, span = s.startSpan(rc, template, rid, start)
			defer fasthttptrace.EndServer(span, rc)
		}
		if ok {
			// Authorization is decided here, once per request.
			perm = ep.perm
			who, err = s.identify(rc)
			refusalKey := refusalKey(rc, who)
			if s.overRefusals(rc, who, refusalKey, template, rid) {
				s.observe(tc, rc, template, rid, false, start)
				return
			}
			if err == nil {
				err = s.authorize(who, ep)
			}
			if span != nil {
				span.SetAttributes(fenceotel.CallerRole.String(who.role()))
			}
			if err == nil {
				err = s.limit(who)
			}
			if err == nil {
				var release func()
				if release, err = s.bodies.take(who.id.String(), !who.dev, len(rc.Request.Body())); err == nil {
					defer release()
				}
			}
			defer func() { s.chargeRefusal(refusalKey, err) }()
		}
		switch {
		case err != nil:
		case !ok:
			rc.Response.Header.Set("Allow", r.allow)
			err = fmt.Errorf("%w: %s allows %s", ErrMethod, r.template, r.allow)
		case ep.raw != nil:
			ep.raw(s, rc)
		case ep.upgrade != nil:
			err = ep.upgrade(s, rc, who)
		default:
			forwarded, err = s.serveJSON(tc, rc, ep, rid, p, who)
		}
	}
	if err != nil {
		p := problemFor(err, string(rc.Path()))
		if p.Code == api.CodeInternal {
			s.log.Error("request failed", withTrace(tc, zap.String("rid", rid), zap.String("route", template), zap.Error(err))...)
		}
		writeProblem(rc, p)
	}
	// A request relayed to the leader is audited there, under its caller
	// and with the leader's answer; here only one refused or failed.
	if perm != "" && !(forwarded && err == nil) {
		s.audit(tc, who, perm, rc, template, rid, err)
	}
	s.observe(tc, rc, template, rid, forwarded, start)
}

// serveJSON runs a JSON endpoint and writes its success answer; it returns
// the error to turn into a problem, if any. A Store answer of ErrNotLeader
// is forwarded to the leader instead (forwarded reports that).
func (s *Server) serveJSON(tc context.Context, rc *fasthttp.RequestCtx, ep endpoint, rid string, p params, who principal) (forwarded bool, err error) {
	q, err := queryArgs(rc.QueryArgs(), ep.query...)
	if err != nil {
		return false, err
	}
	parent := context.Background()
	if rc.IsGet() || rc.IsHead() {
		parent = s.readCtx
	}
	ctx, cancel := context.WithTimeout(parent, s.cfg.RequestTimeout)
	defer cancel()
	ctx = raftstore.WithCaller(ctx, who.caller())
	if span := trace.SpanFromContext(tc); span.IsRecording() {
		ctx = trace.ContextWithSpan(ctx, span)
	}
	c := &call{who: who, ctx: ctx, rc: rc, rid: rid, p: p, query: q}
	status, body, err := ep.json(s, c)
	if isNotLeader(err) {
		return true, s.forward(tc, rc, rid, who)
	}
	if err != nil {
		return false, err
	}
	return false, writeJSON(rc, status, body)
}

// serveError answers what fasthttp rejects before the handler runs
// (oversized body, malformed request line or headers) as a problem too.
func (s *Server) serveError(rc *fasthttp.RequestCtx, err error) {
	var p api.Problem
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		p = problemFor(fmt.Errorf("%w: limit is %d bytes", ErrBodyTooLarge, s.cfg.MaxBodyBytes), "")
	} else {
		p = problemFor(fmt.Errorf("%w: %v", ErrBadRequest, err), "")
	}
	writeProblem(rc, p)
	rc.SetConnectionClose()
	s.metrics.observe("unparsed", methodLabel(rc.Method()), p.Status, 0)
}

// fasthttpLogger routes fasthttp's own messages (connection errors) to zap.
type fasthttpLogger struct{ log *zap.Logger }

// Printf implements fasthttp.Logger.
func (l fasthttpLogger) Printf(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...), zap.String("component", "fasthttp"))
}
