package main

import (
	"context"
	"io"
	"time"

	"go.uber.org/zap"

	"github.com/fencepost/fencepost/config"
	"github.com/fencepost/fencepost/config/tracing"
)

// tracingFlushWait bounds how long a stopping process waits for its last
// spans to reach the collector.
const tracingFlushWait = 5 * time.Second

// startTracing builds the process's span exporter from the tracing section
// (off unless asked for) and returns it with the function that flushes and
// closes it, to run after every traced part has stopped.
func startTracing(cfg config.Tracing, stdout io.Writer, log *zap.Logger) (*tracing.Setup, func(), error) {
	setup, err := tracing.New(cfg.Setup(), tracing.Options{Console: stdout})
	if err != nil {
		return nil, nil, err
	}
	if setup.On() {
		log.Info("tracing on", zap.String("exporter", cfg.Exporter), zap.String("endpoint", cfg.Endpoint),
			zap.String("protocol", cfg.Protocol), zap.String("sampler", cfg.Sampler))
	}
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), tracingFlushWait)
		defer cancel()
		if err := setup.Shutdown(ctx); err != nil {
			log.Warn("tracing: could not flush every span", zap.Error(err))
		}
	}
	return setup, stop, nil
}
