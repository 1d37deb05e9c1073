package clients

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/proxy"
	"github.com/fencepost/fencepost/proxy/cluster"
	"github.com/fencepost/fencepost/proxy/mitm"
	"github.com/fencepost/fencepost/test/scenario"
)

// hit is one request the upstream received.
type hit struct {
	method, path string
	tokens, keys []string
}

// upstream is the loopback HTTPS (or plain) service the clients call.
type upstream struct {
	ln   net.Listener
	srv  *fasthttp.Server
	mu   sync.Mutex
	hits []hit
	held chan struct{} // a /hold request arrived
	stop chan struct{} // closed at cleanup: held streams end
}

// upstreamHandler serves /w (a write: 201), /sse (two events 1.5 s apart)
// and /hold (a write whose event stream waits until stop).
func (u *upstream) handle(ctx *fasthttp.RequestCtx) {
	h := hit{method: string(ctx.Method()), path: string(ctx.Path())}
	for _, v := range ctx.Request.Header.PeekAll(fence.HeaderToken) {
		h.tokens = append(h.tokens, string(v))
	}
	for _, v := range ctx.Request.Header.PeekAll(fence.HeaderIdempotencyKey) {
		h.keys = append(h.keys, string(v))
	}
	u.mu.Lock()
	u.hits = append(u.hits, h)
	u.mu.Unlock()
	switch h.path {
	case "/sse", "/hold":
		ctx.SetContentType("text/event-stream")
		hold := h.path == "/hold"
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
			_, _ = w.WriteString("data: 1\n\n")
			_ = w.Flush()
			wait := time.After(1500 * time.Millisecond)
			if hold {
				u.held <- struct{}{}
				wait = time.After(20 * time.Second)
			}
			select {
			case <-wait:
			case <-u.stop:
			}
			_, _ = w.WriteString("data: 2\n\n")
			_ = w.Flush()
		})
	default:
		ctx.SetStatusCode(201)
		ctx.SetBodyString("charged")
	}
}

func (u *upstream) snapshot() []hit {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]hit(nil), u.hits...)
}

// startUpstream serves on loopback, over TLS when cert is set; opts adjust
// the server before it starts.
func startUpstream(t *testing.T, cert *tls.Config, opts ...func(*fasthttp.Server)) *upstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	u := &upstream{ln: ln, held: make(chan struct{}, 8), stop: make(chan struct{})}
	u.srv = &fasthttp.Server{Handler: u.handle, IdleTimeout: time.Minute}
	for _, o := range opts {
		o(u.srv)
	}
	serveLn := ln
	if cert != nil {
		serveLn = tls.NewListener(ln, cert)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = u.srv.Serve(serveLn) }()
	t.Cleanup(func() {
		close(u.stop)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_ = u.srv.ShutdownWithContext(ctx)
		<-done
	})
	return u
}

func (u *upstream) port() string { _, p, _ := net.SplitHostPort(u.ln.Addr().String()); return p }

// stack is a one-node cluster, a sidecar intercepting loopback HTTPS, and
// the upstreams.
type stack struct {
	cc      *cluster.Client
	sc      *proxy.Sidecar
	tlsUp   *upstream
	plainUp *upstream
	bundle  string
	env     []string // what a worker exports, and nothing else of ours
}

// upstreamTLS returns a server config with leaves for 127.0.0.1 and
// names under .localhost from a test CA, and that CA's file.
func upstreamTLS(t *testing.T) (*tls.Config, string) {
	ca, err := mitm.New(mitm.Config{Hosts: []string{"127.0.0.1", "*.localhost"}})
	require.NoError(t, err)
	f := filepath.Join(t.TempDir(), "upstream-ca.pem")
	require.NoError(t, os.WriteFile(f, ca.CertPEM(), 0o600))
	return &tls.Config{GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
		name := h.ServerName
		if name == "" {
			name = "127.0.0.1"
		}
		return ca.Leaf(name)
	}}, f
}

func startStack(t *testing.T, mut func(*proxy.Config), opts ...func(*fasthttp.Server)) *stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := scenario.StartCluster(ctx, scenario.ClusterConfig{Nodes: 1, Dir: t.TempDir(), TTL: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cl.Close()) })
	cc, err := cluster.New(cluster.Config{Endpoints: cl.Endpoints()})
	require.NoError(t, err)
	t.Cleanup(cc.Close)

	srvTLS, caFile := upstreamTLS(t)
	st := &stack{cc: cc, tlsUp: startUpstream(t, srvTLS, opts...), plainUp: startUpstream(t, nil, opts...)}
	st.bundle = filepath.Join(t.TempDir(), "ca-bundle.pem")
	cfg := proxy.Config{
		WorkerID: "worker-clients", ProxyAddr: "127.0.0.1:0", ControlAddr: "127.0.0.1:0",
		Endpoints: cl.Endpoints(), Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
		Registerer: prometheus.NewRegistry(), DrainTimeout: time.Second,
		Intercept: proxy.Intercept{Hosts: []string{"127.0.0.1", "*.localhost"}, BundleFile: st.bundle, UpstreamCAFile: caFile},
	}
	if mut != nil {
		mut(&cfg)
	}
	sc, err := proxy.New(cfg, nil)
	require.NoError(t, err)
	require.NoError(t, sc.Start(ctx))
	t.Cleanup(func() { require.NoError(t, sc.Shutdown(context.Background())) })
	st.sc = sc
	p := "http://" + sc.ProxyAddr()
	waitFor(t, func() bool {
		resp, err := http.Get("http://" + sc.ControlAddr() + proxy.PathReady)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == 200
	}, "the sidecar's session is open")
	st.env = []string{"HTTPS_PROXY=" + p, "https_proxy=" + p, "HTTP_PROXY=" + p, "http_proxy=" + p, "NODE_USE_ENV_PROXY=1"}
	info, ok := sc.CA()
	require.True(t, ok)
	for k, v := range info.Env {
		st.env = append(st.env, k+"="+v)
	}
	return st
}

// acquire takes task through the control API, as a worker does, and
// waits until the sidecar holds it.
func (st *stack) acquire(t *testing.T, task string) uint64 {
	t.Helper()
	body, _ := json.Marshal(proxy.AcquireRequest{TaskID: task, Create: true, Profile: scenario.ProfileName})
	resp, err := http.Post("http://"+st.sc.ControlAddr()+proxy.PathAcquire, "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	var g proxy.GrantReply
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&g))
	_ = resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	return g.Lease.Epoch
}

// revoke has an operator revoke task and waits until the sidecar knows.
func (st *stack) revoke(t *testing.T, task string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := st.cc.Revoke(ctx, task, api.RevokeRequest{Reason: "client matrix"})
	require.NoError(t, err)
	waitFor(t, func() bool {
		for _, l := range st.sc.Leases() {
			if l.TaskID == task && l.Current {
				return false
			}
		}
		return true
	}, "the sidecar drops the revoked lease")
}

// baseEnv is the test's environment without proxy or CA variables a
// developer's shell may carry.
func baseEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(k) {
		case "HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR",
			"REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "NODE_USE_ENV_PROXY":
			continue
		}
		out = append(out, kv)
	}
	return out
}

func waitFor(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
