package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/cluster"
	"github.com/fencepost/fencepost/proxy/mitm"
)

// Sidecar is one worker's sidecar: session and heartbeat loop, forward
// proxy and control API. Create it with New, run it with Start, stop it
// with Shutdown.
type Sidecar struct {
	cfg          Config
	cluster      Cluster
	owned        *cluster.Client // built by New from Endpoints; closed by Shutdown
	log          *zap.Logger
	clock        Clock
	leases       *leaseTable
	events       *broker
	metrics      *metrics
	gatherer     prometheus.Gatherer
	up           *upstream
	rules        []WriteRule
	journal      Journal // nil unless Config.Journal has rules
	journalRules []WriteRule
	allow        map[string]bool // CONNECT targets, lower-case host:port
	ca           *mitm.CA        // nil unless Config.Intercept.Hosts is set
	tunnels      *generation     // fenced tunnels, closed by Shutdown

	mu         sync.Mutex // guards state, servers and listeners
	state      int        // 0 new, 1 started, 2 closed
	proxy      *fasthttp.Server
	tunnelSrv  *fasthttp.Server // serves the inside of fenced tunnels
	control    *fasthttp.Server
	metricsSrv *fasthttp.Server // nil unless Config.MetricsAddr is set
	metricsLn  net.Listener
	proxyLn    net.Listener
	ctlLn      net.Listener
	cancel     context.CancelFunc
	loops      sync.WaitGroup // background loops
	serving    sync.WaitGroup // Serve goroutines and tunnels

	sessMu sync.RWMutex
	sid    string

	wakeHB    chan struct{} // lease set changed: recompute the heartbeat schedule
	hbNow     atomic.Bool   // with wakeHB: send a heartbeat now (a watch saw a change)
	wakeWatch chan struct{} // lease set changed: start or stop watching
	wakeDog   chan struct{} // lease set changed: recompute the watchdog timer
	inflight  atomic.Int64  // proxy requests and response relays in progress
	draining  atomic.Bool
}

// New checks cfg, applies its defaults and builds a sidecar that talks to
// the cluster through c; when c is nil it builds a *cluster.Client for
// cfg.Endpoints itself (and closes it on Shutdown). Nothing is started.
func New(cfg Config, c Cluster) (*Sidecar, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	var owned *cluster.Client
	if c == nil {
		if len(cfg.Endpoints) == 0 {
			return nil, fmt.Errorf("%w: endpoints: required when no cluster client is given", ErrInvalidConfig)
		}
		cc, err := cluster.New(cluster.Config{Endpoints: cfg.Endpoints, Timeout: cfg.ClusterTimeout, Logger: cfg.Logger.Named("cluster")})
		if err != nil {
			return nil, fmt.Errorf("%w: endpoints: %v", ErrInvalidConfig, err)
		}
		c, owned = cc, cc
	}
	s := &Sidecar{
		cfg:       cfg,
		cluster:   c,
		owned:     owned,
		log:       cfg.Logger.Named("sidecar"),
		clock:     cfg.Clock,
		leases:    newLeaseTable(cfg.Drift, cfg.MarginFloor),
		events:    newBroker(),
		rules:     normalizeRules(append(append([]WriteRule(nil), cfg.WriteRules...), presetRules(cfg.WritePresets)...)),
		allow:     make(map[string]bool),
		wakeHB:    make(chan struct{}, 1),
		wakeWatch: make(chan struct{}, 1),
		wakeDog:   make(chan struct{}, 1),
	}
	if len(cfg.Journal) > 0 {
		j, ok := c.(Journal)
		if !ok {
			return nil, fmt.Errorf("%w: journal: the cluster client does not implement proxy.Journal", ErrInvalidConfig)
		}
		s.journal = j
		for _, r := range cfg.Journal {
			s.journalRules = append(s.journalRules, WriteRule{Host: r.Host, PathPrefix: r.PathPrefix, Methods: r.Methods, Write: true})
		}
		s.journalRules = normalizeRules(s.journalRules)
	}
	for _, a := range cfg.ConnectAllow {
		h, p, _ := splitHostPort(a)
		s.allow[net.JoinHostPort(h, fmt.Sprint(p))] = true
	}
	up, err := newUpstream(cfg)
	if err != nil {
		return nil, err
	}
	s.up = up
	if s.ca, err = newCA(cfg); err != nil {
		return nil, err
	}
	s.tunnels = newGeneration()
	m, err := newMetrics(cfg.Registerer,
		func() time.Duration { return s.leases.minRemaining(s.clock.Now()) },
		s.leases.count)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	if g, ok := cfg.Registerer.(prometheus.Gatherer); ok {
		s.gatherer = g
	}
	return s, nil
}

// Start binds both loopback listeners, starts serving, and starts the
// session, heartbeat and (in one-task mode) acquire loops in the
// background. ctx bounds only the start; the loops run until Shutdown.
// Readiness (/readyz) reports when the session is open and, in one-task
// mode, the lease is held.
func (s *Sidecar) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case 1:
		return ErrStarted
	case 2:
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
	pln, err := lc.Listen(ctx, "tcp", s.cfg.ProxyAddr)
	if err != nil {
		return fmt.Errorf("proxy: listen proxyAddr: %w", err)
	}
	cln, err := lc.Listen(ctx, "tcp", s.cfg.ControlAddr)
	if err != nil {
		_ = pln.Close()
		return fmt.Errorf("proxy: listen controlAddr: %w", err)
	}
	servers := []struct {
		srv *fasthttp.Server
		ln  net.Listener
	}{}
	if s.cfg.MetricsAddr != "" {
		mln, err := lc.Listen(ctx, "tcp", s.cfg.MetricsAddr)
		if err != nil {
			_, _ = pln.Close(), cln.Close()
			return fmt.Errorf("proxy: listen metricsAddr: %w", err)
		}
		s.metricsLn, s.metricsSrv = mln, s.newMetricsServer()
		servers = append(servers, struct {
			srv *fasthttp.Server
			ln  net.Listener
		}{s.metricsSrv, mln})
	}
	s.proxyLn, s.ctlLn = pln, cln
	s.proxy = s.newProxyServer()
	s.tunnelSrv = s.newTunnelServer()
	s.control = s.newControlServer()
	s.state = 1
	for _, p := range append(servers, []struct {
		srv *fasthttp.Server
		ln  net.Listener
	}{{s.proxy, lingerListener{pln}}, {s.control, cln}}...) {
		s.serving.Add(1)
		go func() {
			defer s.serving.Done()
			if err := p.srv.Serve(p.ln); err != nil {
				s.log.Error("serve", zap.Error(err))
			}
		}()
	}
	bg, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.goLoop(func() { s.runHeartbeat(bg) })
	s.goLoop(func() { s.runWatchdog(bg) })
	if w, ok := s.cluster.(sessionWatcher); ok {
		s.goLoop(func() { s.runWatch(bg, w) })
	}
	if s.cfg.Task != "" {
		s.goLoop(func() { s.runOneTask(bg) })
	}
	s.log.Info("sidecar started", zap.String("proxy", pln.Addr().String()),
		zap.String("control", cln.Addr().String()), zap.String("worker", s.cfg.WorkerID))
	return nil
}

func (s *Sidecar) goLoop(f func()) {
	s.loops.Add(1)
	go func() {
		defer s.loops.Done()
		f()
	}()
}

// MetricsAddr returns the bound metrics address ("" when off or before Start).
func (s *Sidecar) MetricsAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.metricsLn == nil {
		return ""
	}
	return s.metricsLn.Addr().String()
}

// ProxyAddr returns the bound proxy address ("" before Start).
func (s *Sidecar) ProxyAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proxyLn == nil {
		return ""
	}
	return s.proxyLn.Addr().String()
}

// ControlAddr returns the bound control address ("" before Start).
func (s *Sidecar) ControlAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctlLn == nil {
		return ""
	}
	return s.ctlLn.Addr().String()
}

// Subscribe returns a channel of lease events and a function that ends
// the subscription. The channel is closed on cancel, on Shutdown, or if
// the subscriber falls more than a buffer behind.
func (s *Sidecar) Subscribe() (<-chan Event, func()) { return s.events.subscribe() }

// Leases returns the local view of every held lease.
func (s *Sidecar) Leases() []LeaseView { return s.leases.views(s.clock.Now()) }

// Shutdown drains and stops the sidecar: it keeps heartbeating while
// in-flight proxy requests finish (at most DrainTimeout, or until ctx
// ends), then closes the proxy, gives every held lease back explicitly so
// a new owner can take it at once, closes the session and stops the
// control server. Giving back and closing the session get ClusterTimeout
// each even when ctx has ended.
func (s *Sidecar) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	switch s.state {
	case 0:
		s.mu.Unlock()
		return ErrNotStarted
	case 2:
		s.mu.Unlock()
		return ErrClosed
	}
	s.state = 2
	s.mu.Unlock()
	s.draining.Store(true)

	drainCtx, cancel := context.WithTimeout(ctx, s.cfg.DrainTimeout)
	s.waitIdle(drainCtx)
	cancel()
	var errs []error
	stopCtx, cancel := context.WithTimeout(context.Background(), time.Second)
	if err := s.proxy.ShutdownWithContext(stopCtx); err != nil {
		errs = append(errs, fmt.Errorf("proxy: stop proxy server: %w", err))
	}
	cancel()
	s.tunnels.cutAll()

	// The drain may have used up ctx; giving the leases back and closing
	// the session still get their own bounded time, because skipping them
	// makes the next owner wait a whole TTL.
	final := context.WithoutCancel(ctx)
	s.giveBackAll(final)
	s.cancel()
	s.loops.Wait()
	if sid := s.sessionID(); sid != "" {
		cctx, cancel := context.WithTimeout(final, s.cfg.ClusterTimeout)
		if err := s.cluster.CloseSession(cctx, sid); err != nil {
			s.log.Warn("close session", zap.Error(err))
		}
		cancel()
	}
	s.events.close()
	stopCtx, cancel = context.WithTimeout(context.Background(), time.Second)
	if err := s.control.ShutdownWithContext(stopCtx); err != nil {
		errs = append(errs, fmt.Errorf("proxy: stop control server: %w", err))
	}
	if s.metricsSrv != nil {
		if err := s.metricsSrv.ShutdownWithContext(stopCtx); err != nil {
			errs = append(errs, fmt.Errorf("proxy: stop metrics server: %w", err))
		}
	}
	cancel()
	s.up.close()
	s.serving.Wait()
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
	for s.inflight.Load() > 0 {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// giveBackAll releases every held lease as given back, so reclaim is
// immediate instead of waiting for expiry, and drops it locally even when
// the cluster cannot be reached (the lease then expires on its own).
func (s *Sidecar) giveBackAll(ctx context.Context) {
	sid := s.sessionID()
	for _, v := range s.leases.views(s.clock.Now()) {
		if sid != "" {
			cctx, cancel := context.WithTimeout(ctx, s.cfg.ClusterTimeout)
			_, err := s.cluster.Release(cctx, v.TaskID, api.ReleaseRequest{
				SessionID: sid, Epoch: v.Epoch, Outcome: lease.OutcomeGivenBack, Reason: "sidecar shutdown",
			})
			cancel()
			if err != nil {
				s.log.Warn("give back on shutdown", zap.String("task", v.TaskID), zap.Error(err))
			}
		}
		s.dropLease(v.TaskID, v.Epoch, reasonReleased, EventReleased, "sidecar shutdown")
	}
}

func (s *Sidecar) sessionID() string {
	s.sessMu.RLock()
	defer s.sessMu.RUnlock()
	return s.sid
}

func (s *Sidecar) setSession(sid string) {
	s.sessMu.Lock()
	s.sid = sid
	s.sessMu.Unlock()
}

// publish records and fans out a lease event.
func (s *Sidecar) publish(kind EventKind, taskID string, epoch uint64, why string) {
	s.metrics.leaseEvents.WithLabelValues(string(kind)).Inc()
	if ce := s.log.Check(zap.InfoLevel, "lease event"); ce != nil {
		ce.Write(zap.String("kind", string(kind)), zap.String("task", taskID), zap.Uint64("epoch", epoch), zap.String("reason", why))
	}
	s.events.publish(Event{Kind: kind, TaskID: taskID, Epoch: epoch, Reason: why, At: s.clock.Now()})
}

// cut closes everything that depends on a lease generation.
func (s *Sidecar) cut(g *generation) {
	if g == nil {
		return
	}
	if n := g.cutAll(); n > 0 {
		s.metrics.tunnelsCut.Add(float64(n))
	}
}

// dropLease forgets a lease locally, cuts its connections and publishes.
func (s *Sidecar) dropLease(taskID string, epoch uint64, r reason, kind EventKind, why string) {
	g, ep, ok := s.leases.drop(taskID, epoch, r)
	if !ok {
		return
	}
	s.cut(g)
	s.publish(kind, taskID, ep, why)
	s.poke()
}

// poke wakes the heartbeat loop and the watchdog after the lease set
// changed.
func (s *Sidecar) poke() {
	for _, ch := range []chan struct{}{s.wakeHB, s.wakeDog, s.wakeWatch} {
		select {
		case ch <- struct{}{}:
		default:
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
