// Package refsvc is the reference fenced service: a small fasthttp server
// that keeps an append-only log of accepted writes per task behind the
// fasthttpfence middleware. It shows how a downstream uses package fence,
// and it is the downstream the demo and the fault tests write to: its log
// records, for every accepted write, the epoch it carried, so invariant I3
// can be checked from outside (Server.Log, GET /v1/log) and its metrics
// count stale writes (the double-execution alarm).
//
// Routes:
//
//	POST /v1/tasks/{task}/writes  fenced; body = any bytes; appends an Entry, 201 + the Entry as JSON
//	GET  /v1/tasks/{task}         TaskState: max epochs and the task's entries
//	GET  /v1/log                  LogPage: every Entry in append order and the newest refusals (Config.ServeLog)
//	GET  /healthz                 200 {"status":"ok"}
//	GET  /metrics                 Prometheus
//
// The {task} in the path must equal X-Fencing-Task (else 403
// scope-rejected), so a token for one task cannot append to another.
package refsvc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/fence/fasthttpfence"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the service's spans.
const tracerName = "github.com/fencepost/fencepost/fence/refsvc"

// Sentinel errors of package refsvc.
var (
	// ErrInvalidConfig: Config.Validate failed.
	ErrInvalidConfig = errors.New("refsvc: invalid configuration")
	// ErrState: Start or Close called out of order.
	ErrState = errors.New("refsvc: wrong server state")
)

// Defaults of Config.
const (
	DefaultMaxLogEntries = 1_000_000
	shutdownTimeout      = 5 * time.Second
)

// Config configures the reference service.
type Config struct {
	// Addr is the TCP address to listen on; "127.0.0.1:0" picks a free
	// port (see Server.Addr). Required.
	Addr string
	// VerifyKeys, when set, makes every write carry a valid
	// X-Fencing-Signature by one of these keys (fence.FetchKeys or
	// fence.ParseKeys build one from the cluster's /v1/keys).
	VerifyKeys fence.KeySet
	// AllowUnsigned accepts unsigned writes even with VerifyKeys set.
	AllowUnsigned bool
	// Registerer receives the metrics; nil means a private registry.
	// Pass a fresh prometheus.NewRegistry() per server in tests.
	Registerer prometheus.Registerer
	// Gatherer serves GET /metrics; nil means Registerer if it is also a
	// Gatherer (a *prometheus.Registry is), else the private registry.
	Gatherer prometheus.Gatherer
	// Store overrides the in-memory store.
	Store fence.Store
	// MemStore bounds the in-memory store used without Store (zero
	// fields: fence's defaults, among them a per-holder share of the
	// task table, MaxTasksPerHolder).
	MemStore fence.MemStoreConfig
	// MaxLogEntries bounds the in-memory log (default
	// DefaultMaxLogEntries); a write past it gets 507.
	MaxLogEntries int
	// MaxBodyBytes bounds a write's body (default fence.DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// ServeLog serves GET /v1/log. Off by default: the log names every
	// task, holder and body digest the service accepted.
	ServeLog bool
	// TLS, when set, serves HTTPS with it instead of plain HTTP.
	TLS *tls.Config
	// TracerProvider, when set, opens a server span per request that
	// continues the caller's traceparent and carries the fence's verdict
	// (fenceotel.Annotate). Nil is tracing off: no span, no work.
	TracerProvider trace.TracerProvider
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.Addr == "" {
		return fmt.Errorf("%w: Addr is required", ErrInvalidConfig)
	}
	if c.MaxLogEntries < 0 || c.MaxBodyBytes < 0 {
		return fmt.Errorf("%w: MaxLogEntries and MaxBodyBytes must not be negative", ErrInvalidConfig)
	}
	if c.Registerer != nil && c.Gatherer == nil {
		if _, ok := c.Registerer.(prometheus.Gatherer); !ok {
			return fmt.Errorf("%w: Registerer is not a Gatherer; set Gatherer for /metrics", ErrInvalidConfig)
		}
	}
	return nil
}

// Server is the reference fenced service.
type Server struct {
	cfg      Config
	mem      *fence.MemStore // nil when Config.Store is set
	metrics  *metrics
	gatherer prometheus.Gatherer
	handler  fasthttp.RequestHandler
	state    *state
	refused  refusals
	tracer   trace.Tracer // nil when tracing is off

	mu     sync.Mutex // guards srv, ln, served
	srv    *fasthttp.Server
	ln     net.Listener
	served chan error
}

// New builds the service; it does not listen yet.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxLogEntries == 0 {
		cfg.MaxLogEntries = DefaultMaxLogEntries
	}
	s := &Server{cfg: cfg, state: newState(cfg.MaxLogEntries)}
	reg, gat := cfg.Registerer, cfg.Gatherer
	if reg == nil {
		r := prometheus.NewRegistry()
		reg, gat = r, r
	}
	if gat == nil {
		gat = reg.(prometheus.Gatherer)
	}
	s.gatherer = gat
	var err error
	if s.metrics, err = newMetrics(reg); err != nil {
		return nil, fmt.Errorf("%w: metrics: %v", ErrInvalidConfig, err)
	}
	store := cfg.Store
	if store == nil {
		if s.mem, err = fence.NewMemStore(cfg.MemStore); err != nil {
			return nil, err
		}
		store = s.mem
	}
	if cfg.TracerProvider != nil {
		s.tracer = cfg.TracerProvider.Tracer(tracerName)
	}
	mw, err := fasthttpfence.New(fasthttpfence.Config{
		Config: fence.Config{
			Store:         store,
			Keys:          cfg.VerifyKeys,
			AllowUnsigned: cfg.AllowUnsigned,
			IsWrite:       isWrite,
			MaxBodyBytes:  cfg.MaxBodyBytes,
			Observer:      s.metrics.observe,
			Annotate:      s.annotate,
		},
		Scope: pathScope,
	})
	if err != nil {
		return nil, err
	}
	s.handler = s.routes(mw)
	return s, nil
}

// Handler returns the service's handler, for embedding it in another
// fasthttp server instead of calling Start.
func (s *Server) Handler() fasthttp.RequestHandler { return s.handler }

// Start listens on Config.Addr and serves in the background.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return fmt.Errorf("%w: already started", ErrState)
	}
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("refsvc: listen %s: %w", s.cfg.Addr, err)
	}
	s.ln = ln
	s.srv = &fasthttp.Server{
		Handler:               s.handler,
		Name:                  "fencepost-refsvc",
		ReadTimeout:           30 * time.Second,
		WriteTimeout:          30 * time.Second,
		IdleTimeout:           60 * time.Second,
		MaxRequestBodySize:    int(max(s.cfg.MaxBodyBytes, fence.DefaultMaxBodyBytes)) + 1,
		MaxIdleWorkerDuration: 250 * time.Millisecond, // lets Close finish its goroutines promptly
	}
	s.served = make(chan error, 1)
	srv, served := s.srv, s.served
	if s.cfg.TLS != nil {
		ln = tls.NewListener(ln, s.cfg.TLS)
	}
	go func() { served <- srv.Serve(ln) }()
	return nil
}

// Addr returns the bound address once started ("" before).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Close stops listening, waits (bounded) for requests in flight and
// returns. The log stays readable.
func (s *Server) Close() error {
	s.mu.Lock()
	srv, served, ln := s.srv, s.served, s.ln
	s.srv = nil
	s.mu.Unlock()
	if srv == nil {
		return fmt.Errorf("%w: not started", ErrState)
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	err := srv.ShutdownWithContext(ctx)
	// Shutdown closes only listeners Serve has registered; a Close right
	// after Start would otherwise leave Serve accepting forever.
	_ = ln.Close()
	if serr := <-served; err == nil {
		err = serr
	}
	return err
}

// Run starts the service and closes it when ctx ends; for the fencepost
// binary's subcommand.
func (s *Server) Run(ctx context.Context) error {
	if err := s.Start(); err != nil {
		return err
	}
	<-ctx.Done()
	return s.Close()
}

// Log returns a copy of every accepted write in append order.
func (s *Server) Log() []Entry { return s.state.log() }

// Task returns the state of one task.
func (s *Server) Task(task string) (TaskState, bool) {
	ts, ok := s.state.task(task)
	if ok && s.mem != nil {
		ts.MaxSeenEpoch, _ = s.mem.MaxSeen(fence.TaskKey{Task: task})
	}
	return ts, ok
}

// CheckLog verifies invariant I3 over the log: per task, the epochs of
// accepted writes never decrease in append order.
func (s *Server) CheckLog() error {
	entries := s.Log()
	writes := make([]fence.AppliedWrite, len(entries))
	for i, e := range entries {
		writes[i] = fence.AppliedWrite{Key: fence.TaskKey{Task: e.Task}, Epoch: e.Epoch}
	}
	return fence.CheckEpochOrder(writes)
}
