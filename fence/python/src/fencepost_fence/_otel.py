"""The validator's verdict on the current OpenTelemetry span, under the same
attribute names as the Go package (fence/fenceotel): only when the
``opentelemetry-api`` package is installed, and nothing otherwise. It is not
a dependency: a service that traces has it already (its instrumentation
opened the request's span); one that does not pays one ``is None`` check."""

from __future__ import annotations

try:  # optional: the OpenTelemetry API, never the SDK
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover - depends on the environment
    _trace = None

VERDICT = "fencepost.fence.verdict"
TASK_ID = "fencepost.task.id"
EPOCH = "fencepost.lease.epoch"
IDEMPOTENCY_KEY = "fencepost.idempotency_key"
MAX_SEEN_EPOCH = "fencepost.fence.max_seen_epoch"


def available() -> bool:
    """Whether opentelemetry-api was found at import."""
    return _trace is not None


def annotate(w, problem=None, outcome=None) -> None:
    """Record the verdict (accepted, replayed or the problem's reason), the
    task, the epoch and, for a stale token, the highest epoch seen on the
    current span when it records."""
    if _trace is None:
        return
    span = _trace.get_current_span()
    if not span.is_recording():
        return
    if problem is not None:
        verdict = problem.reason
    elif outcome == "replayed":
        verdict = "replayed"
    else:
        verdict = "accepted"
    attrs = {VERDICT: verdict}
    if w is not None:
        if w.task:
            attrs[TASK_ID] = w.task
        if w.epoch:
            # A string, as in Go: an epoch may exceed a signed 64-bit integer.
            attrs[EPOCH] = str(w.epoch)
        if w.idempotency_key:
            attrs[IDEMPOTENCY_KEY] = w.idempotency_key
    if problem is not None and problem.max_seen_epoch is not None:
        attrs[MAX_SEEN_EPOCH] = problem.max_seen_epoch
    span.set_attributes(attrs)
