package console

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"
)

// callTimeout bounds the cluster calls of one page.
const callTimeout = 5 * time.Second

// Server is a running console.
type Server struct {
	cfg     Config
	log     *zap.Logger
	guard   *guard
	hub     *hub
	metrics *ring
	ln      net.Listener
	srv     *http.Server
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	url     string
}

// Start validates cfg, listens and serves until Close.
func Start(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("console: listen on %s: %w", cfg.Listen, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, log: cfg.Logger, ln: ln, ctx: ctx, cancel: cancel, metrics: newRing()}
	addr := ln.Addr().String()
	s.guard = newGuard(addr, cfg.Hosts, cfg.Token, cfg.TLS != nil)
	s.hub = newHub(ctx, cfg.Cluster, cfg.Logger)
	scheme := "http"
	if cfg.TLS != nil {
		scheme = "https"
		s.ln = tls.NewListener(ln, cfg.TLS)
	}
	s.url = scheme + "://" + addr + "/"
	s.srv = &http.Server{
		Handler:           s.guard.wrap(s.routes()),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    32 << 10,
		ErrorLog:          zap.NewStdLog(cfg.Logger),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("console: serve", zap.Error(err))
		}
	}()
	go func() {
		defer s.wg.Done()
		s.scrapeLoop(ctx)
	}()
	return s, nil
}

// URL is the console's address for a browser, "http(s)://host:port/".
func (s *Server) URL() string { return s.url }

// Addr is the address the console listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops serving: open event streams end, then the listener closes.
func (s *Server) Close() error {
	s.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	_ = s.ln.Close() // Shutdown misses a Serve that has not registered yet
	s.wg.Wait()
	return err
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET "+staticPrefix, staticHandler())
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/tasks", http.StatusSeeOther)
	})
	mux.HandleFunc("GET /tasks", s.tasksPage)
	mux.HandleFunc("GET /tasks/{id}", s.taskPage)
	mux.HandleFunc("POST /tasks/{id}/{action}", s.action)
	mux.HandleFunc("GET /workers", s.workersPage)
	mux.HandleFunc("GET /cluster", s.clusterPage)
	mux.HandleFunc("GET /health", s.healthPage)
	mux.HandleFunc("GET /live", s.serveLive)
	return mux
}

// callCtx bounds one page's cluster calls.
func (s *Server) callCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), callTimeout)
}
