// Package fenceotel holds what every fencepost part shares about traces:
// the attribute names (fencepost.task.id, fencepost.lease.epoch, ...), the
// W3C trace-context propagator, the log field names that tie a zap line to
// its span, and Annotate, the fence.Config.Annotate hook that records a
// validator's verdict on the request's span.
//
// It depends on the OpenTelemetry API only (go.opentelemetry.io/otel/trace,
// attribute, propagation), never on the SDK: with no SDK installed every
// span is a no-op and Annotate does nothing. Package fence itself does not
// import it; a service opts in by setting the hook.
package fenceotel

import (
	"context"
	"strconv"

	"github.com/fencepost/fencepost/fence"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Attribute names fencepost adds to the OTel semantic conventions. Every
// hop that knows the task and epoch of a call records them under these
// names, so one query finds a task's calls across worker, sidecar, cluster
// and fenced service.
const (
	// TaskID is the task a call was made for.
	TaskID = attribute.Key("fencepost.task.id")
	// Epoch is the lease epoch (the fencing token) of the call.
	Epoch = attribute.Key("fencepost.lease.epoch")
	// Decision is what the sidecar did with a call: forwarded, blocked,
	// replayed or in_doubt.
	Decision = attribute.Key("fencepost.decision")
	// BlockReason says why the sidecar blocked a write (a problem code).
	BlockReason = attribute.Key("fencepost.block.reason")
	// IdempotencyKey is the call's Idempotency-Key.
	IdempotencyKey = attribute.Key("fencepost.idempotency_key")
	// Verdict is a fence validator's answer to a write: accepted, replayed,
	// or the problem's reason (stale-token, idempotency-in-progress, ...).
	Verdict = attribute.Key("fencepost.fence.verdict")
	// MaxSeenEpoch is the task's highest epoch a validator has seen, on a
	// stale-token verdict.
	MaxSeenEpoch = attribute.Key("fencepost.fence.max_seen_epoch")
	// CallerRole is the role of the cluster API's caller (operator,
	// sidecar, member, reader, ...); never its certificate or secrets.
	CallerRole = attribute.Key("fencepost.caller.role")
	// RaftApply is how long the raft apply of a cluster request took, in
	// milliseconds.
	RaftApply = attribute.Key("fencepost.raft.apply_ms")
	// Worker is the worker id of a lease.
	Worker = attribute.Key("fencepost.worker.id")
)

// The values of Decision.
const (
	DecisionForwarded = "forwarded"
	DecisionBlocked   = "blocked"
	DecisionReplayed  = "replayed"
	DecisionInDoubt   = "in_doubt"
)

// The values of Verdict besides a problem's reason.
const (
	VerdictAccepted = "accepted"
	VerdictReplayed = "replayed"
)

// Log field names a zap line written inside a traced request carries.
const (
	LogTraceID = "trace_id"
	LogSpanID  = "span_id"
)

// Propagator reads and writes the W3C traceparent and tracestate headers;
// every hop uses it, so a trace continues the same way everywhere.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// IDs returns the trace and span id of ctx's span in hex, for log fields;
// ok is false outside a valid span.
func IDs(ctx context.Context) (traceID, spanID string, ok bool) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", "", false
	}
	return sc.TraceID().String(), sc.SpanID().String(), true
}

// Annotate is a fence.Config.Annotate hook: it records the verdict, the
// task and the epoch (and the highest epoch seen, for a stale token) on the
// span in ctx. Without a recording span it does nothing and allocates
// nothing.
func Annotate(ctx context.Context, d fence.Decision) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	verdict := VerdictAccepted
	switch {
	case d.Problem != nil:
		verdict = d.Problem.Reason()
	case d.Outcome == fence.Replayed:
		verdict = VerdictReplayed
	}
	attrs := []attribute.KeyValue{Verdict.String(verdict)}
	if d.Write.Key.Task != "" {
		attrs = append(attrs, TaskID.String(d.Write.Key.Task))
	}
	if d.Write.Epoch != 0 {
		attrs = append(attrs, Epoch.String(strconv.FormatUint(d.Write.Epoch, 10)))
	}
	if d.Write.IdempotencyKey != "" {
		attrs = append(attrs, IdempotencyKey.String(d.Write.IdempotencyKey))
	}
	if d.Problem != nil && d.Problem.MaxSeenEpoch != "" {
		attrs = append(attrs, MaxSeenEpoch.String(d.Problem.MaxSeenEpoch))
	}
	span.SetAttributes(attrs...)
}
