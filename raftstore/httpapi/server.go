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
	"sync"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/fenceotel"
	"github.com/fencepost/fencepost/fence/fenceotel/fasthttptrace"
	"github.com/fencepost/fencepost/fence/pki"
	"github.com/fencepost/fencepost/raftstore"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
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

// Config configures a Server. Every field but Addr has a usable zero value.
type Config struct {
	// Addr is the listen address; "127.0.0.1:0" picks a free port (see
	// Server.Addr).
	Addr string
	// Logger receives access logs (debug level) and errors; nil is a no-op.
	Logger *zap.Logger
	// Gatherer, when set, is served on /metrics beside the server's own
	// HTTP metrics (typically the store's registry).
	Gatherer prometheus.Gatherer
	// MaxBodyBytes bounds a request body; larger ones get 413.
	MaxBodyBytes int
	// BodyBudget bounds the bytes of request bodies in processing at once,
	// all callers together (DefaultBodyBudget); one identity may hold a
	// quarter of it. A request past either gets 503 (retry later), so a
	// flood of large bodies costs the member a bounded amount of memory
	// while it waits on raft. Negative is unbounded.
	BodyBudget int
	// MaxListBytes bounds one page of GET /v1/tasks (DefaultMaxListBytes).
	MaxListBytes int
	// ReadTimeout, WriteTimeout and IdleTimeout are the connection timeouts
	// of the fasthttp server.
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	IdleTimeout  time.Duration
	// ForwardTimeout bounds one forward of a request to the leader.
	ForwardTimeout time.Duration
	// RequestTimeout bounds one Store call; past it the answer is 504
	// timeout (outcome unknown; retry with the same request id).
	RequestTimeout time.Duration
	// ShutdownWait bounds how long Close waits for requests in flight.
	ShutdownWait time.Duration
	// TLS, when set, serves the API over TLS 1.3 with this member's
	// certificate. Client certificates are requested and, when given,
	// verified against the cluster CA during the handshake (pki.ClientAuth:
	// VerifyClientCertIfGiven), so pki.IdentityFromState on a request's
	// connection names a verified caller; probes without one still reach
	// /healthz and /readyz. Forwards to the leader use TLS too, presenting
	// this member's certificate. Nil is plain HTTP, for loopback
	// development only (Start logs a warning, New refuses any other
	// address). With TLS every request is authorized by its caller's role
	// (authz.go); without it every caller is DevIdentity.
	TLS *pki.Source
	// Pprof serves Go's profiler under /debug/pprof/ (CPU, heap,
	// goroutines). Off by default: profiles expose internals and cost CPU.
	Pprof bool

	// BodyReaders names reader identities that may also read bodies
	// (PermReadBodies): payloads, checkpoint data, signals, results.
	BodyReaders []string
	// RatePerIdentity and RateBurst bound each identity's requests per
	// second (DefaultRatePerIdentity, DefaultRateBurst when 0); 429 past
	// them. A negative RatePerIdentity is unlimited.
	RatePerIdentity int
	RateBurst       int
	// AuditLogger receives the audit log (operator actions, membership
	// changes, body reads and every denial); nil uses Logger named "audit".
	AuditLogger *zap.Logger
	// TracerProvider, when set, opens a server span per API request
	// (trace.go); nil is tracing off, at no cost per request.
	TracerProvider trace.TracerProvider
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.AuditLogger == nil {
		c.AuditLogger = c.Logger.Named("audit")
	}
	setDefault(&c.MaxBodyBytes, DefaultMaxBodyBytes)
	setDefault(&c.MaxListBytes, DefaultMaxListBytes)
	setDefault(&c.BodyBudget, DefaultBodyBudget)
	setDefault(&c.RatePerIdentity, DefaultRatePerIdentity)
	setDefault(&c.RateBurst, DefaultRateBurst)
	setDefault(&c.ReadTimeout, DefaultReadTimeout)
	setDefault(&c.WriteTimeout, DefaultWriteTimeout)
	setDefault(&c.IdleTimeout, DefaultIdleTimeout)
	setDefault(&c.ForwardTimeout, DefaultForwardTimeout)
	setDefault(&c.RequestTimeout, DefaultRequestTimeout)
	setDefault(&c.ShutdownWait, DefaultShutdownWait)
	return c
}

func setDefault[T int | time.Duration](v *T, def T) {
	if *v == 0 {
		*v = def
	}
}

// Validate reports the first invalid field, naming it.
func (c Config) Validate() error {
	switch {
	case c.Addr == "":
		return fmt.Errorf("%w: Addr is required", ErrConfig)
	case c.MaxBodyBytes < 0, c.MaxListBytes < 0:
		return fmt.Errorf("%w: MaxBodyBytes and MaxListBytes must not be negative", ErrConfig)
	case c.BodyBudget > 0 && c.BodyBudget < 4*max(c.MaxBodyBytes, DefaultMaxBodyBytes):
		return fmt.Errorf("%w: BodyBudget must be at least 4 x MaxBodyBytes (an identity's share is a quarter)", ErrConfig)
	case c.RatePerIdentity > 0 && c.RateBurst < 1:
		return fmt.Errorf("%w: RateBurst must be at least 1 when RatePerIdentity is limited", ErrConfig)
	case c.ReadTimeout < 0, c.WriteTimeout < 0, c.IdleTimeout < 0:
		return fmt.Errorf("%w: ReadTimeout, WriteTimeout and IdleTimeout must not be negative", ErrConfig)
	case c.ForwardTimeout < 0, c.RequestTimeout < 0, c.ShutdownWait < 0:
		return fmt.Errorf("%w: ForwardTimeout, RequestTimeout and ShutdownWait must not be negative", ErrConfig)
	case c.TLS == nil && !isLoopbackAddr(c.Addr):
		return fmt.Errorf("%w: Addr %s is not loopback: plain HTTP (no TLS, every caller trusted as %s) is for loopback development only", ErrConfig, c.Addr, DevIdentity)
	}
	return nil
}

// Server serves the cluster API for one node.
type Server struct {
	cfg     Config
	store   Store
	log     *zap.Logger
	routes  []*route
	srv     *fasthttp.Server
	fwd     *fasthttp.Client
	metrics *httpMetrics
	pprof   fasthttp.RequestHandler // nil unless Config.Pprof
	// auditLog records operator actions and denials (authz.go).
	auditLog    *zap.Logger
	bodyReaders map[string]bool
	limiter     *limiter
	tracer      trace.Tracer // nil when tracing is off
	// refusals slows callers that keep being refused (refusals.go);
	// denials folds their repeated audit lines into one (denials.go).
	refusals *refusalLimiter
	denials  *denials
	bodies   *bodyBudget

	// readCtx parents the context of every read (GET, HEAD) and is
	// cancelled when Close starts: a read, long polls included, can be
	// abandoned at no cost (the client retries it elsewhere), while a
	// mutation in flight is left to finish so its client gets an answer.
	readCtx   context.Context
	stopReads context.CancelFunc
	mu        sync.Mutex
	ln        net.Listener
	served    chan struct{} // closed when Serve returns
}

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
		if ok && ep.raw == nil && s.tracer != nil {
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
