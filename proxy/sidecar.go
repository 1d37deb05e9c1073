package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/proxy/cluster"
	"github.com/fencepost/fencepost/proxy/conns"
	"github.com/fencepost/fencepost/proxy/control"
	"github.com/fencepost/fencepost/proxy/leases"
	"github.com/fencepost/fencepost/proxy/mitm"
	"github.com/fencepost/fencepost/proxy/proxytrace"
	"github.com/fencepost/fencepost/proxy/request"
	"github.com/fencepost/fencepost/proxy/tunnel"
	"github.com/fencepost/fencepost/proxy/workertie"
)

// Sidecar is one worker's sidecar. It only wires its parts together — the
// lease keeper (session, heartbeats, the lease table), the request
// pipeline (the forward proxy) and the control API — and owns starting
// and stopping them. Create it with New, run it with Start, stop it with
// Shutdown.
type Sidecar struct {
	cfg      Config
	owned    *cluster.Client // built by New from Endpoints; closed by Shutdown
	log      *zap.Logger
	keeper   *leases.Keeper
	tie      *tieKeeper // the keeper as the worker tie sees it (worker.go)
	pipe     *request.Pipeline
	tunnels  *tunnel.Tunnels
	control  *control.API
	ca       *mitm.CA // the interception CA; nil unless Config.Intercept.Hosts is set
	draining bool     // guarded by mu

	mu       sync.Mutex // guards life, draining, servers and listeners
	life     lifecycle
	servers  []*fasthttp.Server // proxy, control, then metrics when set
	served   []net.Listener     // what each of servers serves, in order
	proxyLn  net.Listener
	ctlLn    net.Listener
	metricLn net.Listener
	// captureLns are the transparent listeners (IPv4, then IPv6 when the
	// host has it); nil when capture.listen is off.
	captureLns []net.Listener
	cancel     context.CancelFunc
	loops      sync.WaitGroup // the keeper's loops
	serving    sync.WaitGroup // Serve goroutines and tunnels
}

// lifecycle is where a Sidecar is between New and Shutdown.
type lifecycle uint8

const (
	lifeNew lifecycle = iota
	lifeStarted
	lifeClosed
)

// New checks cfg, applies its defaults and builds a sidecar that talks to
// the cluster through c; when c is nil it builds a *cluster.Client for
// cfg.Endpoints itself (and closes it on Shutdown). Nothing is started.
func New(cfg Config, c Cluster) (*Sidecar, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	var owned *cluster.Client
	if c == nil {
		if len(cfg.Endpoints) == 0 {
			return nil, fmt.Errorf("%w: endpoints: required when no cluster client is given", ErrInvalidConfig)
		}
		cc, err := cluster.New(cluster.Config{Endpoints: cfg.Endpoints, Timeout: cfg.ClusterTimeout, Logger: cfg.Logger.Named("cluster"),
			Trace: proxytrace.ClusterHook(cfg.TracerProvider)})
		if err != nil {
			return nil, fmt.Errorf("%w: endpoints: %v", ErrInvalidConfig, err)
		}
		c, owned = cc, cc
	}
	s := &Sidecar{cfg: cfg, owned: owned, log: cfg.Logger.Named("sidecar")}
	var journal Journal
	if len(cfg.Journal) > 0 {
		j, ok := c.(Journal)
		if !ok {
			return nil, fmt.Errorf("%w: journal: the cluster client does not implement proxy.Journal", ErrInvalidConfig)
		}
		journal = j
	}
	var err error
	tr := proxytrace.New(cfg.TracerProvider) // nil when tracing is off
	if s.keeper, err = leases.New(cfg.leaseSettings(tr), c); err != nil {
		return nil, err
	}
	if s.pipe, err = request.New(cfg.requestSettings(journal, tr), s.keeper); err != nil {
		return nil, err
	}
	if s.ca, err = newCA(cfg); err != nil {
		return nil, err
	}
	if s.ca != nil {
		if err := registerCAExpiry(cfg.Registerer, s.ca); err != nil {
			return nil, err
		}
	}
	if s.tunnels, err = tunnel.New(cfg.tunnelSettings(s.ca, s.newTunnelServer), s.pipe, s.keeper); err != nil {
		return nil, err
	}
	g, _ := cfg.Registerer.(prometheus.Gatherer)
	s.tie = newTieKeeper(s.keeper, cfg.Task)
	s.control = control.New(control.Settings{ClusterTimeout: cfg.ClusterTimeout, Logger: cfg.Logger,
		Attachments: workertie.NewAttachments(s.tie)}, s.keeper, c, g, s.ready)
	ca := func(ctx *fasthttp.RequestCtx) { serveCA(s.CA, ctx) }
	s.control.Handle(PathCA, "GET", ca)
	s.control.Handle(PathCAPEM, "GET", ca)
	return s, nil
}

// Start binds the loopback listeners (and the metrics one when set),
// starts serving, and starts the keeper's session, heartbeat, watch,
// watchdog and (in one-task mode) acquire loops in the background. ctx
// bounds only the start; the loops run until Shutdown. Readiness
// (/readyz) reports when the session is open and, in one-task mode, the
// lease is held.
func (s *Sidecar) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.life {
	case lifeStarted:
		return ErrStarted
	case lifeClosed:
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.ca != nil {
		if err := s.ca.WriteBundle(s.cfg.Intercept.BundleFile); err != nil {
			return fmt.Errorf("proxy: intercept.bundleFile: %w", err)
		}
	}
	var lc net.ListenConfig
	var lns []net.Listener
	listen := func(field, addr string) (net.Listener, error) {
		ln, err := lc.Listen(ctx, "tcp", addr)
		if err != nil {
			for _, l := range lns {
				_ = l.Close()
			}
			return nil, fmt.Errorf("proxy: listen %s: %w", field, err)
		}
		lns = append(lns, ln)
		return ln, nil
	}
	var err error
	if s.proxyLn, err = listen("proxyAddr", s.cfg.ProxyAddr); err != nil {
		return err
	}
	if s.ctlLn, err = listen("controlAddr", s.cfg.ControlAddr); err != nil {
		return err
	}
	s.servers = []*fasthttp.Server{s.newProxyServer(), s.newServer("fencepost-sidecar", s.control.Handler(), control.MaxBody)}
	if s.cfg.MetricsAddr != "" {
		if s.metricLn, err = listen("metricsAddr", s.cfg.MetricsAddr); err != nil {
			return err
		}
		// Read-only operational routes: nothing there can change a lease.
		s.servers = append(s.servers, s.newServer("fencepost-sidecar-metrics", s.control.Handler(PathMetrics, PathHealth, PathReady), 0))
	}
	if s.cfg.Capture.Listen != "" {
		if s.captureLns, err = listenCapture(ctx, &lc, s.cfg.Capture.Listen); err != nil {
			for _, l := range lns {
				_ = l.Close()
			}
			return err
		}
	}
	s.pipe.SetOwnPorts(append(slices.Clone(lns), s.captureLns...))
	s.life = lifeStarted
	lns[0] = conns.LingerListener{Listener: lns[0]} // a refused request's reply is read before the close
	s.served = lns
	for i, ln := range lns {
		srv := s.servers[i]
		s.serving.Add(1)
		go func() {
			defer s.serving.Done()
			if err := srv.Serve(ln); err != nil {
				s.log.Error("serve", zap.Error(err))
			}
		}()
	}
	for _, ln := range s.captureLns {
		s.serving.Add(1)
		go func() {
			defer s.serving.Done()
			if err := s.tunnels.ServeCapture(ln); err != nil {
				s.log.Error("serve capture", zap.Error(err))
			}
		}()
	}
	bg, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	goLoop := func(f func()) {
		s.loops.Add(1)
		go func() {
			defer s.loops.Done()
			f()
		}()
	}
	s.keeper.Run(bg, goLoop)
	goLoop(func() { s.tie.run(bg) })
	if s.cfg.Worker.Health.Enabled() {
		goLoop(func() { s.runProbe(bg) })
	}
	if s.ca != nil {
		// The CA renews itself for as long as the sidecar runs (mitm's
		// renew.go: announce, switch, retire), rewriting the bundle the
		// worker trusts before a new CA signs anything.
		s.loops.Add(1)
		go func() {
			defer s.loops.Done()
			s.ca.KeepRenewed(bg, s.cfg.Intercept.BundleFile, s.reportRenewal)
		}()
	}
	s.log.Info("sidecar started", zap.String("proxy", s.proxyLn.Addr().String()),
		zap.String("control", s.ctlLn.Addr().String()), zap.String("worker", s.cfg.WorkerID))
	return nil
}

// newProxyServer builds the forward proxy's server. Names and paths are
// not normalised (DisableHeaderNamesNormalizing), bodies and header
// blocks are bounded, and reading a request is bounded in time.
func (s *Sidecar) newProxyServer() *fasthttp.Server {
	srv := s.newServer("fencepost-sidecar", s.handleProxy, s.cfg.MaxRequestBody)
	srv.ErrorHandler = s.pipe.ParseError
	srv.ExpectHandler = s.expectProxy
	srv.NoDefaultServerHeader = true
	srv.NoDefaultContentType = true
	srv.NoDefaultDate = true
	srv.DisableHeaderNamesNormalizing = true
	srv.DisablePreParseMultipartForm = true
	srv.ReadBufferSize = s.cfg.MaxHeaderBytes
	return srv
}

// newTunnelServer is the server of the inside of fenced CONNECT tunnels:
// the proxy's limits; package tunnel sets its handlers.
func (s *Sidecar) newTunnelServer() *fasthttp.Server { return s.newProxyServer() }

// handleProxy serves one request on the proxy port: a CONNECT enters the
// tunnels, anything else the request path.
func (s *Sidecar) handleProxy(ctx *fasthttp.RequestCtx) {
	if ctx.IsConnect() {
		s.tunnels.Connect(ctx)
		return
	}
	s.pipe.Serve(ctx, request.Entry{})
}

// expectProxy refuses an "Expect: 100-continue" request before its body
// is uploaded when it would be refused anyway (a CONNECT has no body).
func (s *Sidecar) expectProxy(ctx *fasthttp.RequestCtx) int {
	if ctx.IsConnect() {
		return fasthttp.StatusContinue
	}
	return s.pipe.Expect(ctx, request.Entry{})
}

// newServer is a server with the sidecar's timeouts and logger.
func (s *Sidecar) newServer(name string, h fasthttp.RequestHandler, maxBody int) *fasthttp.Server {
	return &fasthttp.Server{
		Handler:            h,
		Name:               name,
		MaxRequestBodySize: maxBody,
		ReadTimeout:        s.cfg.ReadTimeout,
		IdleTimeout:        s.cfg.IdleTimeout,
		CloseOnShutdown:    true,
		Logger:             fastLogger{s.log},
	}
}

func addrOf(mu *sync.Mutex, ln *net.Listener) string {
	mu.Lock()
	defer mu.Unlock()
	if *ln == nil {
		return ""
	}
	return (*ln).Addr().String()
}

// MetricsAddr returns the bound metrics address ("" when off or before Start).
func (s *Sidecar) MetricsAddr() string { return addrOf(&s.mu, &s.metricLn) }

// ProxyAddr returns the bound proxy address ("" before Start).
func (s *Sidecar) ProxyAddr() string { return addrOf(&s.mu, &s.proxyLn) }

// ControlAddr returns the bound control address ("" before Start).
func (s *Sidecar) ControlAddr() string { return addrOf(&s.mu, &s.ctlLn) }

// Subscribe returns a channel of lease events and a function that ends
// the subscription. The channel is closed on cancel, on Shutdown, or if
// the subscriber falls more than a buffer behind.
func (s *Sidecar) Subscribe() (<-chan Event, func()) { return s.keeper.Subscribe() }

// CA returns the interception CA's description, or false when
// interception is off.
func (s *Sidecar) CA() (CAInfo, bool) {
	if s.ca == nil {
		return CAInfo{}, false
	}
	return caInfo(s.ca, s.cfg.Intercept), true
}

// Leases returns the local view of every held lease.
func (s *Sidecar) Leases() []LeaseView { return s.keeper.Views() }

// ready is the readiness condition: not draining, and the keeper's.
func (s *Sidecar) ready() (bool, string) {
	s.mu.Lock()
	draining := s.draining
	s.mu.Unlock()
	if draining {
		return false, "draining"
	}
	return s.keeper.Ready()
}

// Shutdown drains and stops the sidecar: it keeps heartbeating while
// in-flight proxy requests finish (at most DrainTimeout, or until ctx
// ends), then closes the proxy, gives every held lease back explicitly so
// a new owner can take it at once, closes the session and stops the
// control server. Giving back and closing the session get ClusterTimeout
// each even when ctx has ended.
func (s *Sidecar) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	switch s.life {
	case lifeNew:
		s.mu.Unlock()
		return ErrNotStarted
	case lifeClosed:
		s.mu.Unlock()
		return ErrClosed
	}
	s.life, s.draining = lifeClosed, true
	s.mu.Unlock()

	drainCtx, cancel := context.WithTimeout(ctx, s.cfg.DrainTimeout)
	s.waitIdle(drainCtx)
	cancel()
	var errs []error
	stop := func(what string, i int) {
		stopCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := s.servers[i].ShutdownWithContext(stopCtx); err != nil {
			errs = append(errs, fmt.Errorf("proxy: stop %s server: %w", what, err))
		}
		// Shutdown closes only the listeners Serve has registered; a stop
		// right after the start would leave Serve accepting forever.
		_ = s.served[i].Close()
	}
	stop("proxy", 0)
	for _, ln := range s.captureLns {
		_ = ln.Close() // from now on captured connections are refused (RST)
	}
	s.tunnels.Close()

	// The drain may have used up ctx; giving the leases back and closing
	// the session still get their own bounded time, because skipping them
	// makes the next owner wait a whole TTL.
	final := context.WithoutCancel(ctx)
	s.keeper.GiveBackAll(final)
	s.cancel()
	s.loops.Wait()
	s.keeper.CloseSession(final)
	stop("control", 1)
	if len(s.servers) > 2 {
		stop("metrics", 2)
	}
	s.pipe.Close()
	s.serving.Wait()
	s.tunnels.Wait()
	if s.owned != nil {
		s.owned.Close()
	}
	s.log.Info("sidecar stopped")
	return errors.Join(errs...)
}

// waitIdle returns when no proxy request is in flight or ctx ends. It
// polls: fasthttp has no completion hook, and a 10ms poll is cheap.
func (s *Sidecar) waitIdle(ctx context.Context) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for s.pipe.InFlight()+s.tunnels.InFlight() > 0 {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// fastLogger routes fasthttp's own log lines to zap at debug level:
// they are per-connection noise (client resets, bad requests), and every
// one of them already gets an HTTP error reply.
type fastLogger struct{ l *zap.Logger }

func (f fastLogger) Printf(format string, args ...any) {
	if ce := f.l.Check(zap.DebugLevel, "fasthttp"); ce != nil {
		ce.Write(zap.String("msg", fmt.Sprintf(format, args...)))
	}
}

// reportRenewal logs one step of the interception CA's renewal: the
// steps at info, a failed one (the bundle could not be written, so the
// switch waits) at warn.
func (s *Sidecar) reportRenewal(e mitm.Event) {
	if e.Kind == mitm.Failed {
		s.log.Warn("interception CA renewal failed; retrying", zap.Time("signingCAExpires", e.NotAfter), zap.Error(e.Err))
		return
	}
	s.log.Info("interception CA renewal", zap.String("step", string(e.Kind)), zap.Time("notAfter", e.NotAfter))
}

// CaptureAddr is the transparent listener's IPv4 address once started,
// or "" when capture.listen is off.
func (s *Sidecar) CaptureAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.captureLns) == 0 {
		return ""
	}
	return s.captureLns[0].Addr().String()
}
