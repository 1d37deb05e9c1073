// The validator's verdict on the active OpenTelemetry span, under the same
// attribute names as the Go package (fence/fenceotel): only when
// @opentelemetry/api is installed (an optional peer dependency), and nothing
// otherwise. A service that traces has the API already; its instrumentation
// opened the request's span.

import { createRequire } from "node:module";
import type { Problem } from "./problems.js";
import type { Outcome, Write } from "./validator.js";

/** The two names of @opentelemetry/api this module uses. */
interface TraceAPI {
  getActiveSpan(): { isRecording(): boolean; setAttributes(a: Record<string, string>): unknown } | undefined;
}

function load(): TraceAPI | undefined {
  try {
    return (createRequire(import.meta.url)("@opentelemetry/api") as { trace: TraceAPI }).trace;
  } catch {
    return undefined; // not installed: tracing is someone else's business
  }
}

const api = load();

/** Whether @opentelemetry/api was found. */
export function otelAvailable(): boolean {
  return api !== undefined;
}

/**
 * Records the verdict (accepted, replayed or the problem's reason), the
 * task, the epoch and, for a stale token, the highest epoch seen on the
 * active span when it records.
 */
export function annotate(d: { write?: Write; problem?: Problem; outcome?: Outcome }): void {
  const span = api?.getActiveSpan();
  if (!span || !span.isRecording()) return;
  const attrs: Record<string, string> = {
    "fencepost.fence.verdict": d.problem ? d.problem.type.slice(d.problem.type.lastIndexOf("/") + 1)
      : d.outcome === "replayed" ? "replayed" : "accepted",
  };
  const w = d.write;
  if (w?.task) attrs["fencepost.task.id"] = w.task;
  // A string, as in Go: an epoch may exceed a signed 64-bit integer.
  if (w && w.epoch > 0n) attrs["fencepost.lease.epoch"] = w.epoch.toString();
  if (w?.idempotencyKey) attrs["fencepost.idempotency_key"] = w.idempotencyKey;
  if (d.problem?.max_seen_epoch !== undefined) attrs["fencepost.fence.max_seen_epoch"] = d.problem.max_seen_epoch;
  span.setAttributes(attrs);
}
