package proxy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/config/tracing"
	"github.com/fencepost/fencepost/test/otlprecv"
)

// The proxy path against a direct call in the same run:
//
//	go test ./proxy -run XXX -bench . -benchtime 2s
//
// Each benchmark reports p50 and p99 latency per request; the added
// latency of the sidecar is the difference to BenchmarkDirect.
func benchClient(b *testing.B, proxy string) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}
	if proxy != "" {
		u, _ := url.Parse(proxy)
		tr.Proxy = http.ProxyURL(u)
	}
	b.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func runBench(b *testing.B, c *http.Client, method, url string) {
	lat := make([]time.Duration, 0, b.N)
	body := strings.Repeat("x", 256)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var r io.Reader
		if method == "POST" {
			r = strings.NewReader(body)
		}
		req, _ := http.NewRequest(method, url, r)
		start := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		lat = append(lat, time.Since(start))
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

func benchSidecar(b *testing.B) *Sidecar {
	cfg := baseConfig(b)
	cfg.Logger = zap.NewNop()
	cfg.Registerer = prometheus.NewRegistry()
	s := startSidecar(b, newFakeCluster(), cfg)
	mustAcquire(b, s, "bench")
	return s
}

func BenchmarkDirect(b *testing.B) {
	up := startUpstream(b, nil)
	up.mu.Lock()
	up.reqs = make([]seen, 0, 1<<20)
	up.mu.Unlock()
	runBench(b, benchClient(b, ""), "GET", "http://"+up.addr()+"/r")
}

func BenchmarkDirectPOST(b *testing.B) {
	up := startUpstream(b, nil)
	runBench(b, benchClient(b, ""), "POST", "http://"+up.addr()+"/w")
}

func BenchmarkProxyGET(b *testing.B) {
	up := startUpstream(b, nil)
	s := benchSidecar(b)
	runBench(b, benchClient(b, "http://"+s.ProxyAddr()), "GET", "http://"+up.addr()+"/r")
}

func BenchmarkProxyPOST(b *testing.B) {
	up := startUpstream(b, nil)
	s := benchSidecar(b)
	runBench(b, benchClient(b, "http://"+s.ProxyAddr()), "POST", "http://"+up.addr()+"/w")
}

// The forward path alone, as workload 5 of test/bench drives it: raw
// keep-alive connections write a prebuilt absolute-form request and parse
// the response, so almost all CPU and allocations per op are the
// sidecar's (and the minimal upstream's, which BenchmarkRawDirect shows):
//
//	go test ./proxy -run XXX -bench Raw -benchmem -cpuprofile /tmp/cpu.out
func BenchmarkRawDirectGET(b *testing.B) {
	up := startBenchUpstream(b)
	runRaw(b, up, rawRequest("GET", "/bench", up, nil))
}

func BenchmarkRawProxyGET(b *testing.B) {
	up := startBenchUpstream(b)
	s := benchSidecar(b)
	runRaw(b, s.ProxyAddr(), rawRequest("GET", "http://"+up+"/bench", up, nil))
}

func BenchmarkRawProxyPOST1K(b *testing.B) {
	up := startBenchUpstream(b)
	s := benchSidecar(b)
	runRaw(b, s.ProxyAddr(), rawRequest("POST", "http://"+up+"/bench", up, bytes.Repeat([]byte("fencepost-bench!"), 64)))
}

// startBenchUpstream is a non-recording upstream that reads the body and
// answers a short JSON body, like test/bench's upstream.
func startBenchUpstream(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	body := []byte(`{"ok":true,"from":"bench-upstream"}` + "\n")
	srv := &fasthttp.Server{
		DisableHeaderNamesNormalizing: true,
		Handler: func(ctx *fasthttp.RequestCtx) {
			_ = len(ctx.PostBody())
			ctx.SetContentType("application/json")
			ctx.SetBody(body)
		},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	b.Cleanup(func() {
		_ = srv.Shutdown()
		<-done
	})
	return ln.Addr().String()
}

func rawRequest(method, target, host string, body []byte) []byte {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: fencepost-bench\r\n", method, target, host)
	if body != nil {
		fmt.Fprintf(&buf, "Content-Type: application/octet-stream\r\nContent-Length: %d\r\n", len(body))
	}
	buf.WriteString("\r\n")
	buf.Write(body)
	return buf.Bytes()
}

// runRaw sends req over parallel keep-alive connections to addr.
func runRaw(b *testing.B, addr string, req []byte) {
	b.ReportAllocs()
	b.SetParallelism(4)
	cpu0, cpuOK := processCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		br := bufio.NewReaderSize(c, 16<<10)
		var resp fasthttp.Response
		for pb.Next() {
			if _, err := c.Write(req); err != nil {
				b.Error(err)
				return
			}
			resp.Reset()
			if err := resp.Read(br); err != nil {
				b.Error(err)
				return
			}
			if resp.StatusCode() != 200 {
				b.Errorf("status %d: %s", resp.StatusCode(), resp.Body())
				return
			}
		}
	})
	b.StopTimer()
	// CPU of the whole process (load, sidecar, upstream): the sidecar's
	// share is the difference to BenchmarkRawDirectGET's.
	if cpu1, ok := processCPU(); ok && cpuOK {
		b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	}
}

// benchTracedSidecar is benchSidecar with tracing on as a user would turn
// it on: every request sampled, OTLP over HTTP (batched) to a local
// collector, here one that only counts what it is sent.
func benchTracedSidecar(b *testing.B) *Sidecar {
	recv := otlprecv.StartCounting(b)
	setup, err := tracing.New(tracing.Config{Exporter: tracing.ExporterOTLP, Endpoint: recv.URL(),
		Sampler: tracing.SamplerAlwaysOn}, tracing.Options{})
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, setup.Shutdown(context.Background())) })
	cfg := baseConfig(b)
	cfg.Logger = zap.NewNop()
	cfg.Registerer = prometheus.NewRegistry()
	cfg.TracerProvider = setup.Provider("sidecar")
	s := startSidecar(b, newFakeCluster(), cfg)
	mustAcquire(b, s, "bench")
	return s
}

// The traced forward path, to compare with BenchmarkRawProxyGET and
// BenchmarkRawProxyPOST1K in the same run (BENCHMARKS.md, "Traces"):
//
//	go test ./proxy -run XXX -bench 'RawProxy(GET|POST1K)' -benchmem
func BenchmarkRawProxyGETTraced(b *testing.B) {
	up := startBenchUpstream(b)
	s := benchTracedSidecar(b)
	runRaw(b, s.ProxyAddr(), rawRequest("GET", "http://"+up+"/bench", up, nil))
}

func BenchmarkRawProxyPOST1KTraced(b *testing.B) {
	up := startBenchUpstream(b)
	s := benchTracedSidecar(b)
	runRaw(b, s.ProxyAddr(), rawRequest("POST", "http://"+up+"/bench", up, bytes.Repeat([]byte("fencepost-bench!"), 64)))
}

// BenchmarkRawBareProxyGET is the floor under the sidecar: a fasthttp
// server whose handler forwards with a fasthttp client (streamed response
// body, as the sidecar's) and copies the response, with no target
// parsing, guard, lease, stamp or metrics. cpu-µs/op minus
// BenchmarkRawDirectGET's is what fasthttp's server and client cost per
// request on their own; BenchmarkRawProxyGET minus this is the fencing.
func BenchmarkRawBareProxyGET(b *testing.B) {
	up := startBenchUpstream(b)
	runRaw(b, startBareProxy(b), rawRequest("GET", "http://"+up+"/bench", up, nil))
}

func BenchmarkRawBareProxyPOST1K(b *testing.B) {
	up := startBenchUpstream(b)
	runRaw(b, startBareProxy(b), rawRequest("POST", "http://"+up+"/bench", up, bytes.Repeat([]byte("fencepost-bench!"), 64)))
}

// startBareProxy serves absolute-form requests by forwarding them as they
// are: the least a fasthttp forward proxy does.
func startBareProxy(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	client := &fasthttp.Client{NoDefaultUserAgentHeader: true, DisableHeaderNamesNormalizing: true,
		DisablePathNormalizing: true, StreamResponseBody: true}
	srv := &fasthttp.Server{
		DisableHeaderNamesNormalizing: true, NoDefaultServerHeader: true, NoDefaultDate: true, NoDefaultContentType: true,
		Handler: func(ctx *fasthttp.RequestCtx) {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			ctx.Request.CopyTo(req)
			if err := client.Do(req, resp); err != nil {
				ctx.Error(err.Error(), fasthttp.StatusBadGateway)
				return
			}
			ctx.SetStatusCode(resp.StatusCode())
			ctx.SetBody(resp.Body())
		},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	b.Cleanup(func() {
		_ = srv.Shutdown()
		<-done
		client.CloseIdleConnections()
	})
	return ln.Addr().String()
}
