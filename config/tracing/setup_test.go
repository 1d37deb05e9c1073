package tracing_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencepost/fencepost/config/tracing"
	"github.com/fencepost/fencepost/test/otlprecv"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestExporterNoneBuildsNothingAndStartsNoGoroutine(t *testing.T) {
	before := goleak.IgnoreCurrent()
	s, err := tracing.New(tracing.Default(), tracing.Options{})
	require.NoError(t, err)
	require.False(t, s.On())
	require.Nil(t, s.Provider("server"), "off means no provider at all, so instrumented code creates no span")
	goleak.VerifyNone(t, before)
	require.NoError(t, s.Shutdown(context.Background()))
}

func TestShutdownFlushesEverySpanToTheOTLPHTTPReceiver(t *testing.T) {
	recv := otlprecv.Start(t)
	cfg := tracing.Default()
	cfg.Exporter, cfg.Endpoint = tracing.ExporterOTLP, recv.URL()
	cfg.ResourceAttributes = "deployment.environment=test,team=a%20b"
	s, err := tracing.New(cfg, tracing.Options{})
	require.NoError(t, err)
	tp := s.Provider("sidecar")
	require.NotNil(t, tp)
	_, span := tp.Tracer("t").Start(context.Background(), "one")
	span.End()
	require.Zero(t, recv.Posts(), "the batcher holds the span until it is flushed")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.Shutdown(ctx))
	// Shutdown returned only after the export: no waiting needed.
	spans := recv.Spans()
	require.Len(t, spans, 1, otlprecv.Summary(spans))
	require.Equal(t, "one", spans[0].Name)
	require.Equal(t, "fencepost-sidecar", spans[0].Service)
	require.Equal(t, "test", spans[0].Resource["deployment.environment"])
}

func TestServiceNameAndResourceAttributes(t *testing.T) {
	recv := otlprecv.Start(t)
	recv.StartGRPC()
	cfg := tracing.Config{Exporter: tracing.ExporterOTLP, Protocol: tracing.ProtocolGRPC, Endpoint: recv.GRPCURL(),
		ServiceName: "billing-worker", ResourceAttributes: "team=a%20b"}
	s, err := tracing.New(cfg, tracing.Options{})
	require.NoError(t, err)
	_, span := s.Provider("sidecar").Tracer("t").Start(context.Background(), "grpc-span")
	span.End()
	require.NoError(t, s.Shutdown(context.Background()))
	got := recv.WaitFor("grpc-span", otlprecv.Named("grpc-span"))
	require.Equal(t, "billing-worker", got.Service, "service_name (OTEL_SERVICE_NAME) wins over the part's name")
	require.Equal(t, "a b", got.Resource["team"])
}

func TestConsoleExporterPrintsEachSpanAtOnce(t *testing.T) {
	var buf bytes.Buffer
	s, err := tracing.New(tracing.Config{Exporter: tracing.ExporterConsole}, tracing.Options{Console: &buf})
	require.NoError(t, err)
	_, span := s.Provider("fenced").Tracer("t").Start(context.Background(), "printed")
	span.End()
	require.Contains(t, buf.String(), `"Name":"printed"`, "the console exporter is synchronous")
	require.NoError(t, s.Shutdown(context.Background()))
}

func TestSamplerAlwaysOffExportsNothing(t *testing.T) {
	recv := otlprecv.Start(t)
	s, err := tracing.New(tracing.Config{Exporter: tracing.ExporterOTLP, Endpoint: recv.URL(),
		Sampler: tracing.SamplerTraceIDRatio, SamplerArg: "0"}, tracing.Options{})
	require.NoError(t, err)
	_, span := s.Provider("server").Tracer("t").Start(context.Background(), "dropped")
	require.False(t, span.IsRecording())
	span.End()
	require.NoError(t, s.Shutdown(context.Background()))
	require.Empty(t, recv.Spans())
}

func TestValidateNamesEachBrokenSetting(t *testing.T) {
	cases := []struct {
		cfg  tracing.Config
		want error
		env  string
	}{
		{tracing.Config{Exporter: "jaeger"}, tracing.ErrExporter, "OTEL_TRACES_EXPORTER"},
		{tracing.Config{Protocol: "http/json"}, tracing.ErrProtocol, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{tracing.Config{Endpoint: "127.0.0.1:4318"}, tracing.ErrEndpoint, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{tracing.Config{Sampler: "sometimes"}, tracing.ErrSampler, "OTEL_TRACES_SAMPLER"},
		{tracing.Config{SamplerArg: "1.5"}, tracing.ErrSampler, "OTEL_TRACES_SAMPLER_ARG"},
		{tracing.Config{ResourceAttributes: "novalue"}, tracing.ErrResource, "OTEL_RESOURCE_ATTRIBUTES"},
	}
	for _, c := range cases {
		err := c.cfg.Validate()
		require.ErrorIs(t, err, c.want, "%+v", c.cfg)
		require.Contains(t, err.Error(), c.env)
		_, err = tracing.New(c.cfg, tracing.Options{})
		require.True(t, errors.Is(err, c.want))
	}
	require.NoError(t, tracing.Default().Validate())
}

func TestParseResourceAttributes(t *testing.T) {
	got, err := tracing.ParseResourceAttributes(" a=1 , b=x%2Cy ")
	require.NoError(t, err)
	require.Equal(t, [][2]string{{"a", "1"}, {"b", "x,y"}}, got)
}
