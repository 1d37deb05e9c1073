package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/config"
	"github.com/fencepost/fencepost/proxy/mitm"
)

// fencedTLS serves the fenced service over HTTPS in `fencepost dev`, so a
// worker can try an https:// call the sidecar intercepts. Its certificate
// comes from a throwaway CA (name-constrained to loopback) that only the
// sidecar trusts, through upstreamBundle (system roots + that CA): the
// worker only ever sees the sidecar's own leaf.
type fencedTLS struct {
	ln   net.Listener
	srv  *fasthttp.Server
	done chan error
}

func startFencedTLS(h fasthttp.RequestHandler, addr, upstreamBundle string) (*fencedTLS, error) {
	ca, err := mitm.New(mitm.Config{Hosts: []string{"127.0.0.1", "localhost", "*.localhost", "::1"}})
	if err != nil {
		return nil, err
	}
	if err := ca.WriteBundle(upstreamBundle); err != nil {
		return nil, fmt.Errorf("%w: %w", config.ErrRuntime, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: ports.fenced_tls: %w", config.ErrRuntime, err)
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		name := hello.ServerName
		if name == "" {
			name = devFencedHost
		}
		return ca.Leaf(name)
	}}
	f := &fencedTLS{ln: ln, done: make(chan error, 1),
		srv: &fasthttp.Server{Handler: h, Name: "fencepost-fenced-tls", ReadTimeout: 30 * time.Second, IdleTimeout: time.Minute, CloseOnShutdown: true}}
	go func() { f.done <- f.srv.Serve(tls.NewListener(ln, tlsCfg)) }()
	return f, nil
}

// Addr is the bound address.
func (f *fencedTLS) Addr() string { return f.ln.Addr().String() }

// Close stops serving.
func (f *fencedTLS) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := f.srv.ShutdownWithContext(ctx)
	// Shutdown closes only the listeners Serve has registered: stopping
	// right after the start (a sidecar refusing its config) would leave
	// Serve blocked in Accept forever, so the listener is closed here too.
	_ = f.ln.Close()
	<-f.done
	return err
}

// printDevHTTPS prints what a worker sets to have its HTTPS calls fenced
// (every host is intercepted in dev) and a call to try.
func printDevHTTPS(w io.Writer, revoke, proxyAddr, fencedURL, bundle, task string) {
	fmt.Fprintf(w, `HTTPS: the sidecar intercepts TLS for every host (its own CA, created at start).
In the worker's shell, for https:// calls (Python requests/httpx, curl, Node 24 fetch, Go),
with the lease held (take it back as above after a revoke):

  export HTTPS_PROXY=http://%[1]s https_proxy=http://%[1]s NODE_USE_ENV_PROXY=1
  export SSL_CERT_FILE=%[3]s REQUESTS_CA_BUNDLE=%[3]s CURL_CA_BUNDLE=%[3]s NODE_EXTRA_CA_CERTS=%[3]s

  fenced service   %[2]s

  curl -s -X POST %[2]s/v1/tasks/%[4]s/writes -d 'step 1'
  %[5]s
  curl -s -X POST %[2]s/v1/tasks/%[4]s/writes -d 'step 2'    # 409 problem+json, x-should-retry: false

`, proxyAddr, fencedURL, bundle, task, revoke)
}
