package config

import (
	"reflect"
	"strings"

	"github.com/fencepost/fencepost/config/problem"
	"github.com/fencepost/fencepost/config/tracing"
)

// Tracing is the tracing section of every role. Each key mirrors one
// standard OTEL_* variable (otelEnv), so an OTel-instrumented deployment's
// environment works unchanged; a key set in the file, a FENCEPOST_TRACING_*
// variable or a flag says the same thing for one role. The defaults belong
// to package tracing.
type Tracing struct {
	// Exporter is none (the default), otlp or console.
	Exporter string `yaml:"exporter" doc:"span exporter: none, otlp or console (OTEL_TRACES_EXPORTER)"`
	// Endpoint is the OTLP collector's base URL.
	Endpoint string `yaml:"endpoint" doc:"OTLP collector base URL, e.g. http://127.0.0.1:4318 (OTEL_EXPORTER_OTLP_ENDPOINT)"`
	// Protocol is http/protobuf (the default) or grpc.
	Protocol string `yaml:"protocol" doc:"OTLP protocol: http/protobuf or grpc (OTEL_EXPORTER_OTLP_PROTOCOL)"`
	// ServiceName is the resource's service.name.
	ServiceName string `yaml:"service_name" doc:"service.name of the spans (default fencepost-<role>; OTEL_SERVICE_NAME)"`
	// ResourceAttributes are extra resource attributes, key=value,...
	ResourceAttributes string `yaml:"resource_attributes" doc:"resource attributes key=value,... (OTEL_RESOURCE_ATTRIBUTES)"`
	// Sampler is an OTel sampler name.
	Sampler string `yaml:"sampler" doc:"sampler: always_on, always_off, traceidratio, parentbased_* (OTEL_TRACES_SAMPLER)"`
	// SamplerArg is the traceidratio samplers' ratio.
	SamplerArg string `yaml:"sampler_arg" doc:"ratio 0..1 of the traceidratio samplers (OTEL_TRACES_SAMPLER_ARG)"`
}

// otelEnv maps each standard OTEL_* variable to the tracing key it sets:
// the one table both the environment overlay and the error labels use.
var otelEnv = []struct{ env, key string }{
	{"OTEL_TRACES_EXPORTER", "tracing.exporter"},
	{"OTEL_EXPORTER_OTLP_ENDPOINT", "tracing.endpoint"},
	{"OTEL_EXPORTER_OTLP_PROTOCOL", "tracing.protocol"},
	{"OTEL_SERVICE_NAME", "tracing.service_name"},
	{"OTEL_RESOURCE_ATTRIBUTES", "tracing.resource_attributes"},
	{"OTEL_TRACES_SAMPLER", "tracing.sampler"},
	{"OTEL_TRACES_SAMPLER_ARG", "tracing.sampler_arg"},
}

// defaultTracing is the tracing every role starts from.
func defaultTracing() Tracing {
	d := tracing.Default()
	return Tracing{Exporter: d.Exporter, Protocol: d.Protocol, Sampler: d.Sampler}
}

// Setup returns the settings for tracing.New.
func (t Tracing) Setup() tracing.Config {
	return tracing.Config{Exporter: t.Exporter, Endpoint: t.Endpoint, Protocol: t.Protocol, ServiceName: t.ServiceName,
		ResourceAttributes: t.ResourceAttributes, Sampler: t.Sampler, SamplerArg: t.SamplerArg}
}

// validate reports each broken setting under its key: package tracing
// names it by its OTEL_* variable, and otelEnv maps that to the key.
func (t Tracing) validate(p *problems) {
	for _, e := range problem.Split(t.Setup().Validate()) {
		fe, ok := e.(*problem.Error)
		if !ok {
			p.add(e)
			continue
		}
		relabeled := *fe
		relabeled.Key = "tracing"
		for _, m := range otelEnv {
			if m.env == fe.Key {
				relabeled.Key = m.key
			}
		}
		p.add(&relabeled)
	}
}

// applyOTelEnv applies the standard OTEL_* variables onto the tracing keys,
// under the FENCEPOST_* layer: a deployment's OTEL_SERVICE_NAME works, and
// FENCEPOST_TRACING_SERVICE_NAME still says what this one role wants. An
// empty variable counts as unset, as with FENCEPOST_* variables. Other
// OTEL_* variables (headers, timeouts, certificates) are the exporter's
// own and it reads them itself.
func applyOTelEnv(cfg Config, env []string, p *problems) {
	root := reflect.ValueOf(cfg).Elem()
	for _, kv := range env {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || value == "" || !strings.HasPrefix(name, "OTEL_") {
			continue
		}
		for _, m := range otelEnv {
			if m.env == name {
				w := walker{where: "env " + name, p: p}
				w.setPath(root, strings.Split(m.key, "."), m.key, value)
			}
		}
	}
}
