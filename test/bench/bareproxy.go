package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/valyala/fasthttp"
)

// pathBare is the bare fasthttp forwarder of workload 5: fasthttp's
// server and HostClient with nothing between them.
const pathBare = "fasthttp (bare)"

// runBareProxy is the hidden "bare-proxy ADDR UPSTREAM" mode of the harness
// binary: a forward proxy that hands each request to a fasthttp HostClient
// and the answer back, with no lease check, no stamping, no headers
// scanned. The sidecar is built on the same two halves, so this is the
// floor its forward path stands on: what the sidecar spends above it is
// fencing work, what it shares with it is fasthttp and the kernel.
func runBareProxy(addr, upstream string) {
	hc := &fasthttp.HostClient{Addr: upstream, MaxConns: 1024, ReadBufferSize: 8192,
		DisableHeaderNamesNormalizing: true, DisablePathNormalizing: true}
	srv := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			if err := hc.Do(&ctx.Request, &ctx.Response); err != nil {
				ctx.Error(err.Error(), fasthttp.StatusBadGateway)
			}
		},
		Name:                          "bench-bare-proxy",
		DisableHeaderNamesNormalizing: true,
		ReadBufferSize:                8192,
	}
	if err := srv.ListenAndServe(addr); err != nil {
		fmt.Fprintln(os.Stderr, "bare-proxy:", err)
		os.Exit(1)
	}
}

// startBareProxy re-runs the harness binary as the bare forwarder to
// upstream on a free port.
func startBareProxy(dir, upstream string, ps *ports) (*proc, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ps.next())
	p, err := startProc("bare-proxy", filepath.Join(dir, "bare-proxy.log"), self, "bare-proxy", addr, upstream)
	if err != nil {
		return nil, "", err
	}
	return p, addr, waitFor(10*time.Second, "bare-proxy", func() error { return tcpUp(addr) })
}
