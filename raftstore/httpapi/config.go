package httpapi

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence/pki"
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
	// streams are the heartbeat streams being served (stream.go); Close
	// ends them, since fasthttp does not track hijacked connections.
	streams       map[*hbStream]struct{}
	streamsClosed bool
	streamWG      sync.WaitGroup
}
