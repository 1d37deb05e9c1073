package request

import (
	"io"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/fencepost/fencepost/fence"
)

// The request path's own steps, without sockets, to price each against
// a forwarded request's whole cost (BenchmarkRawProxyGET in package
// proxy, test/bench workload 5):
//
//	go test ./proxy/request -run XXX -bench . -benchmem

// BenchmarkDecide is everything before the stamp: framing and header
// scan, target parse, the self-target guard, task selection, the write
// classification and the lease check.
func BenchmarkDecide(b *testing.B) {
	tp := newTestPath(b, time.Hour)
	tp.acquire(b, "t")
	ctx := newTestCtx("POST", "http://127.0.0.1:8080/v1/items?x=1", "body")
	ctx.Request.Header.Set("User-Agent", "bench")
	ctx.Request.Header.Set("Content-Type", "application/json")
	b.ReportAllocs()
	for b.Loop() {
		x := exchange{p: tp.p, ctx: ctx}
		if e := x.decide(); e != nil {
			b.Fatal(e.Detail)
		}
	}
}

// BenchmarkRefuseSelfTarget is the per-request self-target guard
// (canonical host and port against the cluster's endpoints and the
// sidecar's own ports) for a loopback target and a named one.
func BenchmarkRefuseSelfTarget(b *testing.B) {
	s := testSettings(b, nil)
	s.Endpoints = []string{"127.0.0.1:7400", "10.0.0.2:7400", "https://fp-3.example:7400"}
	s.RefuseTargets = []string{"10.0.0.2:7401"}
	p, err := New(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Close)
	p.ownPorts = []uint16{7480, 7481}
	for _, tc := range []struct{ name, host, port string }{{"loopback", "127.0.0.1", "8080"}, {"name", "api.example.com", "443"}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if e := p.RefuseSelfTarget(tc.host, tc.port); e != nil {
					b.Fatal(e.Detail)
				}
			}
		})
	}
}

// BenchmarkLogForwarded is the one log line per forwarded write, with
// the sidecar's JSON encoder at info (the default level: written) and at
// warn (checked and skipped).
func BenchmarkLogForwarded(b *testing.B) {
	tp := newTestPath(b, time.Hour)
	tp.acquire(b, "t")
	ctx := newTestCtx("POST", "http://127.0.0.1:8080/v1/items", "body")
	x := exchange{p: tp.p, ctx: ctx, req: fasthttp.AcquireRequest()}
	defer fasthttp.ReleaseRequest(x.req)
	if e := x.decide(); e != nil {
		b.Fatal(e.Detail)
	}
	x.req.Header.Set(fence.HeaderIdempotencyKey, "fp-t-1-0123456789abcdef")
	for _, lvl := range []zapcore.Level{zap.InfoLevel, zap.WarnLevel} {
		b.Run(lvl.String(), func(b *testing.B) {
			core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), lvl)
			saved := tp.p.log
			tp.p.log = zap.New(core).Named("sidecar")
			b.Cleanup(func() { tp.p.log = saved })
			b.ReportAllocs()
			for b.Loop() {
				x.logForwarded(200)
			}
		})
	}
}
