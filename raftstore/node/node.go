// Package node runs one complete lease-cluster member: the raft Store, its
// HTTP API, and, for a node started with join endpoints, the background
// join through an existing member. `fencepost server`, `fencepost dev`, the
// demo and the black-box tests all start members through it, so they run
// the same sequence.
package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/pki"
	"github.com/fencepost/fencepost/raftstore"
	"github.com/fencepost/fencepost/raftstore/httpapi"
)

// ErrConfig reports an unusable Config.
var ErrConfig = errors.New("node: invalid config")

// Config configures a Node.
type Config struct {
	// Store configures the raft store. Store.HTTPAddr is filled from the
	// HTTP server's bound address when left empty, so "127.0.0.1:0" works.
	Store raftstore.Config
	// HTTP configures the API server; HTTP.Addr is where it listens.
	HTTP httpapi.Config
	// Join lists HTTP endpoints of existing members. When set, the node
	// asks them (in turn, until one accepts) to add it as a voter. Joining
	// is idempotent, so a restarted member may keep the list.
	Join []string
	// JoinRetry is the pause between join attempts (default 500ms).
	JoinRetry time.Duration
	// Logger receives the node's logs; nil discards them.
	Logger *zap.Logger
}

// Node is a running member.
type Node struct {
	Store *raftstore.Store
	HTTP  *httpapi.Server

	log    *zap.Logger
	cancel context.CancelFunc
	wg     sync.WaitGroup
	joined chan struct{}
}

// Start opens the store, starts the HTTP API and, with join endpoints,
// starts joining in the background (Joined reports when it succeeded).
func Start(cfg Config) (*Node, error) {
	if cfg.HTTP.Addr == "" {
		return nil, fmt.Errorf("%w: HTTP.Addr is required", ErrConfig)
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	if cfg.Store.Logger == nil {
		cfg.Store.Logger = log
	}
	if cfg.HTTP.Logger == nil {
		cfg.HTTP.Logger = log
	}
	if cfg.HTTP.TLS == nil {
		// One identity per member: the API serves the raft certificate.
		cfg.HTTP.TLS = cfg.Store.TLS
	}
	// The store must know the address others forward to before it takes
	// office, and the HTTP server needs the store; so a ":0" port is
	// resolved to a concrete free port first.
	addr, err := concretePort(cfg.HTTP.Addr)
	if err != nil {
		return nil, err
	}
	cfg.HTTP.Addr = addr
	if cfg.Store.HTTPAddr == "" {
		cfg.Store.HTTPAddr = addr
	}
	st, err := raftstore.Open(cfg.Store)
	if err != nil {
		return nil, err
	}
	srv, err := httpapi.New(cfg.HTTP, st)
	if err == nil {
		err = srv.Start()
	}
	if err != nil {
		return nil, errors.Join(err, st.Close())
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{Store: st, HTTP: srv, log: log, cancel: cancel, joined: make(chan struct{})}
	if len(cfg.Join) == 0 {
		close(n.joined)
		return n, nil
	}
	retry := cfg.JoinRetry
	if retry <= 0 {
		retry = 500 * time.Millisecond
	}
	req := api.JoinRequest{ID: cfg.Store.NodeID, RaftAddr: st.RaftAddr(), HTTPAddr: cfg.Store.HTTPAddr}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.joinLoop(ctx, cfg.Join, req, retry, cfg.Store.TLS)
	}()
	return n, nil
}

// concretePort returns addr with a port of 0 replaced by a port that was
// free a moment ago. The window between probing and the server's own
// listen is microseconds on loopback; a fixed port is returned unchanged.
func concretePort(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("%w: HTTP.Addr %q: %v", ErrConfig, addr, err)
	}
	if port != "0" {
		return addr, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("node: listen %s: %w", addr, err)
	}
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	if err := ln.Close(); err != nil {
		return "", err
	}
	return net.JoinHostPort(host, port), nil
}

// Joined is closed once the node is a member (immediately for a node
// started without join endpoints).
func (n *Node) Joined() <-chan struct{} { return n.joined }

// Close stops joining, the HTTP API and the store, in that order, so no
// request reaches a closed store.
func (n *Node) Close() error {
	n.cancel()
	n.wg.Wait()
	errH := n.HTTP.Close()
	errS := n.Store.Close()
	return errors.Join(errH, errS)
}

func (n *Node) joinLoop(ctx context.Context, endpoints []string, req api.JoinRequest, retry time.Duration, src *pki.Source) {
	body, _ := json.Marshal(req)
	client := &fasthttp.Client{MaxIdemponentCallAttempts: 1}
	scheme := "http://"
	if src != nil {
		// The join presents this member's certificate: the proof that
		// lets it join (the leader checks it names req.ID).
		client.TLSConfig, scheme = src.ClientConfig(""), "https://"
	}
	for attempt := 0; ; attempt++ {
		ep := endpoints[attempt%len(endpoints)]
		err := postJoin(client, scheme, ep, body)
		if err == nil {
			n.log.Info("joined cluster", zap.String("via", ep), zap.String("node_id", req.ID))
			close(n.joined)
			return
		}
		if attempt%10 == 0 {
			n.log.Warn("join attempt failed; retrying", zap.String("via", ep), zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
	}
}

func postJoin(client *fasthttp.Client, scheme, endpoint string, body []byte) error {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	base := endpoint
	if !strings.Contains(base, "://") {
		base = scheme + base
	}
	req.SetRequestURI(strings.TrimRight(base, "/") + api.PathClusterJoin)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	req.SetBody(body)
	if err := client.DoTimeout(req, resp, 5*time.Second); err != nil {
		return err
	}
	if sc := resp.StatusCode(); sc/100 != 2 {
		return fmt.Errorf("join via %s: status %d: %s", endpoint, sc, bytesLimit(resp.Body(), 200))
	}
	return nil
}

func bytesLimit(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return string(b)
}
