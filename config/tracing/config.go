// Package tracing builds the OpenTelemetry TracerProvider of a fencepost
// process from the tracing settings, which mirror the standard OTEL_*
// environment variables (OTEL_TRACES_EXPORTER, OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
// OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG).
//
// It owns the tracing defaults and the one place the SDK is linked in: the
// instrumented packages (raftstore/httpapi, proxy, fence/refsvc) take a
// trace.TracerProvider from the API module only, and a nil provider means
// tracing is off. With the exporter "none" (the default) New builds nothing:
// no provider, no exporter, no goroutine, so the instrumented code skips its
// tracing branch entirely.
//
// It lives under config because only the command wiring (cmd/fencepost,
// which also imports config) builds a provider; raftstore and proxy never
// import it, so it adds no edge between them.
package tracing

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/fencepost/fencepost/config/problem"
)

// The exporters (OTEL_TRACES_EXPORTER).
const (
	// ExporterNone switches tracing off; the default.
	ExporterNone = "none"
	// ExporterOTLP sends spans to an OTLP collector.
	ExporterOTLP = "otlp"
	// ExporterConsole prints each finished span as one JSON line.
	ExporterConsole = "console"
)

// The OTLP protocols (OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	// ProtocolHTTP is OTLP over HTTP with protobuf bodies; the default.
	ProtocolHTTP = "http/protobuf"
	// ProtocolGRPC is OTLP over gRPC.
	ProtocolGRPC = "grpc"
)

// The samplers (OTEL_TRACES_SAMPLER), named as the OTel specification does.
const (
	SamplerAlwaysOn                = "always_on"
	SamplerAlwaysOff               = "always_off"
	SamplerTraceIDRatio            = "traceidratio"
	SamplerParentBasedAlwaysOn     = "parentbased_always_on"
	SamplerParentBasedAlwaysOff    = "parentbased_always_off"
	SamplerParentBasedTraceIDRatio = "parentbased_traceidratio"
)

// Defaults, each in this one place; config's tracing section starts from
// Default().
const (
	// DefaultExporter keeps tracing off unless asked for.
	DefaultExporter = ExporterNone
	// DefaultProtocol is the OTel specification's default.
	DefaultProtocol = ProtocolHTTP
	// DefaultSampler follows the caller's sampling decision and samples
	// every root, as the OTel specification's default does.
	DefaultSampler = SamplerParentBasedAlwaysOn
	// DefaultServicePrefix starts the service.name of each part when none
	// is configured: fencepost-server, fencepost-sidecar, fencepost-fenced.
	DefaultServicePrefix = "fencepost-"
)

// Errors. Validate's *problem.Error for a setting wraps one of them.
var (
	// ErrExporter is an exporter name other than none, otlp or console.
	ErrExporter = errors.New("unknown traces exporter")
	// ErrProtocol is a protocol other than http/protobuf or grpc.
	ErrProtocol = errors.New("unknown OTLP protocol")
	// ErrSampler is an unknown sampler name or a ratio outside [0, 1].
	ErrSampler = errors.New("bad sampler")
	// ErrEndpoint is an endpoint that is not an http or https URL.
	ErrEndpoint = errors.New("bad OTLP endpoint")
	// ErrResource is an OTEL_RESOURCE_ATTRIBUTES list that does not parse.
	ErrResource = errors.New("bad resource attributes")
)

// Config is the tracing section of every role. Each field mirrors one OTEL_*
// variable; the zero value is "tracing off".
type Config struct {
	// Exporter is none, otlp or console (OTEL_TRACES_EXPORTER). Empty
	// means none.
	Exporter string
	// Endpoint is the OTLP base URL (OTEL_EXPORTER_OTLP_ENDPOINT), e.g.
	// http://127.0.0.1:4318; over http/protobuf the exporter posts to
	// Endpoint + "/v1/traces". Empty leaves the exporter's own default and
	// its OTEL_EXPORTER_OTLP_TRACES_* variables in charge.
	Endpoint string
	// Protocol is http/protobuf or grpc (OTEL_EXPORTER_OTLP_PROTOCOL).
	// Empty means http/protobuf.
	Protocol string
	// ServiceName is service.name (OTEL_SERVICE_NAME). Empty means the
	// name New is given ("fencepost-" + the part).
	ServiceName string
	// ResourceAttributes is "key=value,key=value", values percent-encoded
	// (OTEL_RESOURCE_ATTRIBUTES).
	ResourceAttributes string
	// Sampler is one of the OTel sampler names (OTEL_TRACES_SAMPLER).
	// Empty means parentbased_always_on.
	Sampler string
	// SamplerArg is the ratio of the traceidratio samplers, 0 to 1
	// (OTEL_TRACES_SAMPLER_ARG). Empty means 1.
	SamplerArg string
}

// Default returns the defaults: tracing off, the specification's protocol
// and sampler.
func Default() Config {
	return Config{Exporter: DefaultExporter, Protocol: DefaultProtocol, Sampler: DefaultSampler}
}

// On reports whether c asks for an exporter.
func (c Config) On() bool { return c.Exporter != "" && c.Exporter != ExporterNone }

// Validate checks every setting and returns the broken ones joined, each a
// *problem.Error keyed by the setting's OTEL_* variable and wrapping both
// problem.ErrInvalid and this package's sentinel; config re-labels each
// with its key.
func (c Config) Validate() error {
	var l problem.List
	switch c.Exporter {
	case "", ExporterNone, ExporterOTLP, ExporterConsole:
	default:
		l.Rule("OTEL_TRACES_EXPORTER", ErrExporter, "%v %q (want none, otlp or console)", ErrExporter, c.Exporter)
	}
	switch c.Protocol {
	case "", ProtocolHTTP, ProtocolGRPC:
	default:
		l.Rule("OTEL_EXPORTER_OTLP_PROTOCOL", ErrProtocol, "%v %q (want http/protobuf or grpc)", ErrProtocol, c.Protocol)
	}
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			l.Rule("OTEL_EXPORTER_OTLP_ENDPOINT", ErrEndpoint, "%v %q (want an http:// or https:// URL with a host)", ErrEndpoint, c.Endpoint)
		}
	}
	if _, err := c.ratio(); err != nil {
		l.Rule("OTEL_TRACES_SAMPLER_ARG", ErrSampler, "%v", err)
	}
	switch c.Sampler {
	case "", SamplerAlwaysOn, SamplerAlwaysOff, SamplerTraceIDRatio, SamplerParentBasedAlwaysOn,
		SamplerParentBasedAlwaysOff, SamplerParentBasedTraceIDRatio:
	default:
		l.Rule("OTEL_TRACES_SAMPLER", ErrSampler, "%v %q (want always_on, always_off, traceidratio, "+
			"parentbased_always_on, parentbased_always_off or parentbased_traceidratio)", ErrSampler, c.Sampler)
	}
	if _, err := ParseResourceAttributes(c.ResourceAttributes); err != nil {
		l.Rule("OTEL_RESOURCE_ATTRIBUTES", ErrResource, "%v", err)
	}
	return l.Err()
}

// ratio parses SamplerArg; empty is 1.
func (c Config) ratio() (float64, error) {
	if strings.TrimSpace(c.SamplerArg) == "" {
		return 1, nil
	}
	r, err := strconv.ParseFloat(strings.TrimSpace(c.SamplerArg), 64)
	if err != nil || r < 0 || r > 1 {
		return 0, fmt.Errorf("%w: ratio %q must be a number from 0 to 1", ErrSampler, c.SamplerArg)
	}
	return r, nil
}

// ParseResourceAttributes parses an OTEL_RESOURCE_ATTRIBUTES value:
// comma-separated key=value pairs, values percent-decoded, blanks around
// them ignored. It returns the pairs in order.
func ParseResourceAttributes(s string) ([][2]string, error) {
	var out [][2]string
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for item := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(item, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("%w: %q is not key=value", ErrResource, strings.TrimSpace(item))
		}
		dv, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("%w: value of %q is not percent-encoded correctly", ErrResource, k)
		}
		out = append(out, [2]string{k, dv})
	}
	return out, nil
}
