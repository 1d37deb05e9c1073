package proxy

import (
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
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
