package config

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/config/tracing"
)

func TestOTelVariablesSetTheTracingKeys(t *testing.T) {
	env := []string{
		"OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318",
		"OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "OTEL_SERVICE_NAME=billing", "OTEL_RESOURCE_ATTRIBUTES=team=a",
		"OTEL_TRACES_SAMPLER=traceidratio", "OTEL_TRACES_SAMPLER_ARG=0.25",
		"OTEL_EXPORTER_OTLP_HEADERS=x=y", // the exporter's own: not an error, not a key
	}
	cfg, err := LoadFenced(Source{Env: env})
	require.NoError(t, err)
	require.Equal(t, Tracing{Exporter: "otlp", Endpoint: "http://127.0.0.1:4318", Protocol: "grpc", ServiceName: "billing",
		ResourceAttributes: "team=a", Sampler: "traceidratio", SamplerArg: "0.25"}, cfg.Tracing)
}

func TestTracingDefaultsAreOffAndLayersWinInOrder(t *testing.T) {
	cfg, err := LoadFenced(Source{})
	require.NoError(t, err)
	require.Equal(t, "none", cfg.Tracing.Exporter)
	require.Equal(t, "http/protobuf", cfg.Tracing.Protocol)
	require.Equal(t, "parentbased_always_on", cfg.Tracing.Sampler)

	// FENCEPOST_TRACING_* is the role's own word and wins over OTEL_*; an
	// empty OTEL_ variable counts as unset.
	cfg, err = LoadFenced(Source{Env: []string{"OTEL_SERVICE_NAME=shared", "FENCEPOST_TRACING_SERVICE_NAME=mine",
		"OTEL_TRACES_EXPORTER="}})
	require.NoError(t, err)
	require.Equal(t, "mine", cfg.Tracing.ServiceName)
	require.Equal(t, "none", cfg.Tracing.Exporter)
}

func TestBadTracingValuesNameTheKey(t *testing.T) {
	_, err := LoadServer(Source{Env: []string{"OTEL_TRACES_EXPORTER=jaeger", "OTEL_TRACES_SAMPLER_ARG=2"}})
	require.ErrorIs(t, err, ErrInvalid)
	require.Contains(t, err.Error(), "tracing.exporter: unknown traces exporter \"jaeger\"")
	require.Contains(t, err.Error(), "tracing.sampler_arg:")
	require.ErrorIs(t, err, tracing.ErrExporter, "the re-labeled problem still wraps the tracing package's own sentinel")
	require.Len(t, Errors(err), 2, "one line per broken setting")
}

func TestDevTraceConsoleSetsTheConsoleExporter(t *testing.T) {
	cfg, err := LoadDev(Source{Env: []string{"FENCEPOST_TRACE_CONSOLE=true"}})
	require.NoError(t, err)
	require.Equal(t, "console", cfg.Tracing.Exporter)
}
