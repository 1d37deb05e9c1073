package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// pathTraced is a second fencepost sidecar in workload 5 with tracing on:
// every request sampled (always_on) and exported over OTLP/HTTP protobuf
// to otlpSink, a receiver in the harness process. Beside the untraced
// sidecar in the same reps it prices issue 25's "≤ 15 % more CPU per
// proxied request" on a sidecar process of its own, the kernel's share
// included; the receiver's work is the load generator's, not the sidecar's.
const pathTraced = "fencepost sidecar traced"

// otlpSink accepts OTLP/HTTP trace exports and counts their bytes, as a
// collector's receiver would before it decodes: it reads each body whole
// and answers 200 with an empty ExportTraceServiceResponse. Its one
// caller is the harness's traced sidecar: it listens on 127.0.0.1 only,
// for the harness's lifetime, and answers anything but POST /v1/traces
// with 404 (TestOTLPSinkTakesOnlyTraceExports).
type otlpSink struct {
	srv   *http.Server
	addr  string
	posts atomic.Int64
	bytes atomic.Int64
}

// startOTLPSink listens on a free loopback port.
func startOTLPSink(ps *ports) (*otlpSink, error) {
	addr := fmt.Sprintf("127.0.0.1:%d", ps.next())
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &otlpSink{addr: addr}
	s.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			http.Error(w, "only POST /v1/traces", http.StatusNotFound)
			return
		}
		n, _ := io.Copy(io.Discard, r.Body)
		s.posts.Add(1)
		s.bytes.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// close stops the receiver.
func (s *otlpSink) close() { _ = s.srv.Close() }

// endpoint is the base URL a sidecar's tracing.endpoint names.
func (s *otlpSink) endpoint() string { return "http://" + s.addr }

// tracingYAML is the sidecar configuration that turns tracing on toward
// the sink, every request sampled; empty for the untraced sidecar.
func (s *otlpSink) tracingYAML() string {
	if s == nil {
		return ""
	}
	return strings.Join([]string{"tracing:",
		"  exporter: otlp",
		"  protocol: http/protobuf",
		"  endpoint: " + s.endpoint(),
		"  sampler: always_on",
		"  service_name: bench-sidecar", ""}, "\n")
}

// tracedSidecar starts the sink and a sidecar tracing to it (plaintext
// pass only: what tracing costs does not depend on the upstream's TLS).
func (h *harness) tracedSidecar(upstream string) (httpTarget, *otlpSink, error) {
	sink, err := startOTLPSink(&h.ps)
	if err != nil {
		return httpTarget{}, nil, err
	}
	p, addr, err := startSidecar(h.fpBin, h.dir, upstream, h.fp.endpoints(), nil, sink, &h.ps)
	if err != nil {
		sink.close()
		return httpTarget{}, nil, err
	}
	// The ready check's POST is a request span: once the sink has a post,
	// the exporter is wired (the batcher posts within its 5 s schedule).
	err = waitFor(15*time.Second, "traced sidecar's first OTLP export", func() error {
		if sink.posts.Load() == 0 {
			return fmt.Errorf("no export yet")
		}
		return nil
	})
	if err != nil {
		p.stop(syscall.SIGTERM, 5*time.Second)
		sink.close()
		return httpTarget{}, nil, err
	}
	logf("%s: exporting to %s", pathTraced, sink.endpoint())
	return httpTarget{name: pathTraced, addr: addr, absolute: true, proc: p}, sink, nil
}

// tracedGoal is issue 25's speed target: with every request sampled and
// exported, the sidecar's CPU per request at most 1.15× the untraced
// sidecar's in the same reps, GET and POST.
func tracedGoal(res *Results) Goal {
	cpu := func(r Run) float64 { return r.Measure.ServerUsPerOp }
	var gs []Goal
	for _, pc := range proxyCases {
		maxCase := fmt.Sprintf("%s max rate, %d conns", pc.method, res.Settings.ProxyConns)
		gs = append(gs, runGoal(res, "", wlProxy, maxCase, pathTraced, pathSidecar, cpu, "µs CPU/req "+pc.method, 1.15))
	}
	return merge("traced sidecar CPU per request ≤ 1.15× untraced, every request sampled and exported (GET; POST) (issue 25)", gs...)
}
