package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// signalContext returns a context cancelled by the first SIGINT or SIGTERM,
// which starts a graceful shutdown in every command that honours ctx. The
// first signal also restores the default handling, so a second Ctrl-C ends
// the process at once when a shutdown hangs. Call stop to release the
// signal handler.
func signalContext(parent context.Context) (ctx context.Context, stop context.CancelFunc) {
	ctx, stop = signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	return ctx, stop
}
