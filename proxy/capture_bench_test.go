package proxy

import (
	"context"
	"flag"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/proxy/capture"
	"github.com/fencepost/fencepost/test/netns"
)

// BenchmarkCapture compares the captured path with the explicit-proxy
// path, in the same run, against the same upstream and the same sidecar:
// keep-alive GET and POST (256 B), each reporting p50 and p99.
//
//	go test ./proxy -run XXX -bench BenchmarkCapture -benchtime 2s -count 5
//
// With -count N the four sub-benchmarks run N rounds, alternating (proxy,
// captured, proxy, captured ...), so drift on a shared machine hits both
// paths alike; repeated names get the suffixes #01, #02 ... It
// needs root (a network namespace and nat rules): the benchmark re-runs
// this binary inside a namespace of its own and prints the figures
// measured there; the outer run is then reported as skipped.
func BenchmarkCapture(b *testing.B) {
	if os.Getenv(captureNetnsEnv) == "" {
		ns := netns.New(b, "fpcapb")
		args := []string{"netns", "exec", ns.Name, os.Args[0], "-test.run=^$", "-test.bench=^BenchmarkCapture$", "-test.benchmem"}
		for _, name := range []string{"test.benchtime", "test.cpu"} {
			if f := flag.Lookup(name); f != nil {
				args = append(args, "-"+name+"="+f.Value.String())
			}
		}
		reps := "1"
		if f := flag.Lookup("test.count"); f != nil {
			reps = f.Value.String()
		}
		// -count would repeat each sub-benchmark back to back; the reps
		// are run here instead, so the paths alternate.
		cmd := exec.Command("ip", append(args, "-test.count=1")...)
		cmd.Env = append(os.Environ(), captureNetnsEnv+"="+ns.Name, captureRepsEnv+"="+reps)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			b.Fatalf("the benchmark failed inside its namespace: %v", err)
		}
		b.Skip("measured inside namespace " + ns.Name + ": the figures are above")
	}
	tables, err := capture.Detect(capture.Auto, "")
	if err != nil {
		b.Fatal(err)
	}
	// Idle timeouts beyond a sub-benchmark's pause on both hops: a pooled
	// connection closed between two sub-benchmarks would fail a POST (the
	// sidecar never retries a write), which is not what is measured here.
	up := startUpstreamOnAddr(b, net.JoinHostPort(netns.UpstreamIPv4, "0"), nil,
		func(s *fasthttp.Server) { s.IdleTimeout = time.Minute })
	up.mu.Lock()
	up.reqs = make([]seen, 0, 1<<20)
	up.mu.Unlock()
	cfg := baseConfig(b)
	cfg.Logger, cfg.Registerer = zap.NewNop(), prometheus.NewRegistry()
	cfg.Capture = Capture{Listen: "127.0.0.1:0"}
	cfg.IdleTimeout, cfg.ReadTimeout, cfg.UpstreamIdleTimeout = time.Minute, time.Minute, 30*time.Second
	s := startSidecar(b, newFakeCluster(), cfg)
	mustAcquire(b, s, "bench")
	plan := capture.Plan{ListenPort: portOf(b, s.CaptureAddr()), WorkerUID: workerUID, Tag: "fpcap-bench", Chain: "FPCAP_BENCH"}
	b.Cleanup(func() { _ = tables.Remove(plan, capture.Families()) })
	if err := tables.Install(plan, capture.Families()); err != nil {
		b.Fatal(err)
	}
	proxied := benchClient(b, "http://"+s.ProxyAddr())
	captured := benchClient(b, "")
	captured.Transport.(*http.Transport).DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return capture.DialAs(ctx, "", workerUID, network, addr, 5*time.Second)
	}
	base := "http://" + up.addr()
	reps, _ := strconv.Atoi(os.Getenv(captureRepsEnv))
	for range max(reps, 1) {
		b.Run("proxy-GET", func(b *testing.B) { runBench(b, proxied, "GET", base+"/r") })
		b.Run("captured-GET", func(b *testing.B) { runBench(b, captured, "GET", base+"/r") })
		b.Run("proxy-POST", func(b *testing.B) { runBench(b, proxied, "POST", base+"/w") })
		b.Run("captured-POST", func(b *testing.B) { runBench(b, captured, "POST", base+"/w") })
	}
}

// captureRepsEnv carries -count into the namespace (see BenchmarkCapture).
const captureRepsEnv = "CAPTURE_BENCH_REPS"
