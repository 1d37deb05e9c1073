package main

import (
	"fmt"
	"os"

	"github.com/valyala/fasthttp"
)

// upstreamBody is what the upstream answers every request with.
var upstreamBody = []byte(`{"ok":true,"from":"bench-upstream"}` + "\n")

// runUpstream is the hidden "upstream ADDR" mode of the harness binary: a
// small fasthttp server that every proxy path ends at. It runs in its own
// process so its CPU use is not mixed with the load generator's. It reads
// the request body (so a POST costs its bytes) and answers 200 with a short
// JSON body.
func runUpstream(addr string) {
	if err := upstreamServer().ListenAndServe(addr); err != nil {
		fmt.Fprintln(os.Stderr, "upstream:", err)
		os.Exit(1)
	}
}

// runUpstreamTLS is the hidden "upstream-tls ADDR CERT KEY" mode: the same
// server over TLS, for workload 7.
func runUpstreamTLS(addr, cert, key string) {
	if err := upstreamServer().ListenAndServeTLS(addr, cert, key); err != nil {
		fmt.Fprintln(os.Stderr, "upstream-tls:", err)
		os.Exit(1)
	}
}

func upstreamServer() *fasthttp.Server {
	return &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			_ = len(ctx.PostBody())
			ctx.SetContentType("application/json")
			ctx.SetBody(upstreamBody)
		},
		Name:                          "bench-upstream",
		DisableHeaderNamesNormalizing: true,
		ReadBufferSize:                8192,
	}
}
