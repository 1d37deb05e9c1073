// Package worker is the Go worker SDK of the sidecar's control API
// (DESIGN.md 14): hold a task in a block, stop the work at once when the
// lease is lost, resume from the handed-over checkpoint.
//
//	err := worker.Run(ctx, "t1", func(ctx context.Context, l *worker.Lease) error {
//		// ctx is cancelled the moment the sidecar says stop (lost, revoked, ...)
//		return l.Checkpoint(ctx, "page-1", map[string]int{"page": 1})
//	})
//
// It owns the worker side of the control API's contract: the calls
// (acquire, claim, checkpoint, progress, wait, complete, fail, give back),
// the attach stream (GET /v1/attach?task=T, kept open for the block's
// lifetime so the worker's death ends the lease, reconnected with
// Last-Event-ID), and the problem+json errors, one Kind per code from the
// shared error table (errors_gen.go, written by ./internal/gen). Control
// calls never go through a proxy: the SDK adds no request to a tool call's
// path.
package worker
