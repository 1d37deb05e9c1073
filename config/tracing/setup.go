package tracing

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Setup holds the exporter of one process and the TracerProviders built on
// it. The zero Setup and the one New returns for exporter none are off:
// Provider returns nil and Shutdown does nothing.
type Setup struct {
	cfg      Config
	exporter sdktrace.SpanExporter // nil when off
	console  bool
	res      []attribute.KeyValue

	mu        sync.Mutex
	providers []*sdktrace.TracerProvider
}

// Options are what New takes besides the settings.
type Options struct {
	// Console is where the console exporter writes; nil means os.Stdout,
	// as in other OTel programs.
	Console io.Writer
}

// New builds the exporter cfg names. For exporter none it returns an off
// Setup and starts nothing. cfg is validated first.
func New(cfg Config, opts Options) (*Setup, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Setup{cfg: cfg}
	if !cfg.On() {
		return s, nil
	}
	pairs, _ := ParseResourceAttributes(cfg.ResourceAttributes)
	for _, kv := range pairs {
		s.res = append(s.res, attribute.String(kv[0], kv[1]))
	}
	var err error
	switch cfg.Exporter {
	case ExporterConsole:
		w := opts.Console
		if w == nil {
			w = os.Stdout
		}
		s.console = true
		s.exporter, err = stdouttrace.New(stdouttrace.WithWriter(w))
	case ExporterOTLP:
		s.exporter, err = newOTLP(cfg)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// noProxy keeps the exporter off HTTP_PROXY: a sidecar's environment may
// name the sidecar itself, and spans must not loop through it.
func noProxy(*http.Request) (*url.URL, error) { return nil, nil }

// newOTLP builds the OTLP exporter: over http/protobuf fencepost's own
// (httpExporter, which encodes spans without the stock exporter's proto
// structs), over gRPC or OTLP/JSON the stock one. Without an endpoint the
// exporter keeps its defaults and reads the OTEL_EXPORTER_OTLP_* variables
// (headers, timeout, compression, certificates, the per-signal endpoint);
// with one, the per-signal OTEL_EXPORTER_OTLP_TRACES_ENDPOINT still wins,
// as the specification says.
func newOTLP(cfg Config) (sdktrace.SpanExporter, error) {
	endpoint := cfg.Endpoint
	if os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" {
		endpoint = ""
	}
	ctx := context.Background()
	if cfg.Protocol == ProtocolGRPC {
		var o []otlptracegrpc.Option
		if endpoint != "" {
			o = append(o, otlptracegrpc.WithEndpointURL(endpoint))
		}
		return otlptracegrpc.New(ctx, o...)
	}
	if endpoint != "" {
		endpoint = strings.TrimSuffix(endpoint, "/") + otlpTracesPath
	}
	if !jsonProtocol() {
		return newHTTPExporter(endpoint)
	}
	o := []otlptracehttp.Option{otlptracehttp.WithProxy(noProxy)}
	if endpoint != "" {
		o = append(o, otlptracehttp.WithEndpointURL(endpoint))
	}
	return otlptracehttp.New(ctx, o...)
}

// jsonProtocol reports whether the OTLP exporter's own variables ask for
// OTLP/JSON (the per-signal one first), which only the stock exporter
// speaks; fencepost's own exporter speaks protobuf.
func jsonProtocol() bool {
	v, ok := otlpEnv("TRACES_PROTOCOL")
	if !ok {
		v, _ = otlpEnv("PROTOCOL")
	}
	return v == "http/json"
}

// On reports whether spans are exported.
func (s *Setup) On() bool { return s != nil && s.exporter != nil }

// Provider returns the TracerProvider of one part of the process (server,
// sidecar, fenced), or nil when tracing is off: the instrumented packages
// take nil as "do nothing". Its service.name is the configured one or
// "fencepost-" + part; fencepost dev, which runs every part in one process,
// gets one provider per part so a trace shows the hops as services.
func (s *Setup) Provider(part string) trace.TracerProvider {
	if !s.On() {
		return nil
	}
	name := s.cfg.ServiceName
	if name == "" {
		for _, kv := range s.res {
			if kv.Key == "service.name" {
				name = kv.Value.AsString()
			}
		}
	}
	if name == "" {
		name = DefaultServicePrefix + part
	}
	attrs := append(append([]attribute.KeyValue(nil), s.res...), attribute.String("service.name", name))
	res, _ := resource.New(context.Background(), resource.WithTelemetrySDK(), resource.WithAttributes(attrs...))
	ratio, _ := s.cfg.ratio()
	shared := sharedExporter{s.exporter}
	smp := sampler(s.cfg.Sampler, ratio)
	p := &Provider{res: res, smp: smp}
	var proc sdktrace.SpanProcessor
	if s.console {
		proc = sdktrace.NewSimpleSpanProcessor(shared) // print at once, in order
	} else {
		var data dataExporter
		if h, ok := s.exporter.(*httpExporter); ok {
			data = h
		}
		p.batch = newBatcher(shared, data) // the BatchSpanProcessor's contract, cheaper per span
		proc = p.batch
	}
	p.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSampler(smp),
		sdktrace.WithSpanProcessor(proc))
	s.mu.Lock()
	s.providers = append(s.providers, p.TracerProvider)
	s.mu.Unlock()
	return p
}

// Provider is the TracerProvider Setup.Provider returns: the SDK's, and a
// Recorder for the path that opens a span per proxied request.
type Provider struct {
	*sdktrace.TracerProvider
	res   *resource.Resource
	smp   sdktrace.Sampler
	batch *batcher // nil for the console exporter
}

// Recorder returns a Recorder whose spans carry the instrumentation scope
// name, or nil when this provider's exporter cannot take them as they are
// (the console exporter, and the stock gRPC and OTLP/JSON ones): callers
// then use the SDK's Tracer. Its spans go to the same processor as the
// SDK's, so Shutdown and ForceFlush cover both.
func (p *Provider) Recorder(name string) *Recorder {
	if p == nil || p.batch == nil || p.batch.data == nil {
		return nil
	}
	return &Recorder{res: p.res, scope: instrumentation.Scope{Name: name}, smp: p.smp, b: p.batch, limits: readLeanLimits()}
}

// sampler maps a sampler name to the SDK's sampler.
func sampler(name string, ratio float64) sdktrace.Sampler {
	switch name {
	case SamplerAlwaysOn:
		return sdktrace.AlwaysSample()
	case SamplerAlwaysOff:
		return sdktrace.NeverSample()
	case SamplerTraceIDRatio:
		return sdktrace.TraceIDRatioBased(ratio)
	case SamplerParentBasedAlwaysOff:
		return sdktrace.ParentBased(sdktrace.NeverSample())
	case SamplerParentBasedTraceIDRatio:
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))
	}
	return sdktrace.ParentBased(sdktrace.AlwaysSample())
}

// Shutdown flushes every provider's pending spans to the exporter, then
// closes the exporter. ctx bounds the wait. It is safe on an off Setup and
// to call twice.
func (s *Setup) Shutdown(ctx context.Context) error {
	if !s.On() {
		return nil
	}
	s.mu.Lock()
	tps := s.providers
	s.providers = nil
	s.mu.Unlock()
	var errs []error
	for _, tp := range tps {
		errs = append(errs, tp.Shutdown(ctx))
	}
	errs = append(errs, s.exporter.Shutdown(ctx))
	return errors.Join(errs...)
}

// sharedExporter lets several providers' processors feed one exporter:
// a provider's shutdown must not close it under the others, so Setup
// closes it once, last.
type sharedExporter struct{ sdktrace.SpanExporter }

// Shutdown does nothing; Setup.Shutdown closes the real exporter.
func (sharedExporter) Shutdown(context.Context) error { return nil }
