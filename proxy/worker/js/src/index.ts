// @fencepost/worker: the TypeScript worker SDK of the fencepost sidecar's
// control API (ESM, Node >= 20, no runtime dependencies). Hold a task in a
// block; the SDK keeps the task's attach stream open (so the worker's
// death ends the lease) and aborts lease.signal the moment the sidecar
// says stop.

export { Client, DEFAULT_CONTROL_URL, problemError, type Grant, type LeaseView } from "./client.js";
export { ControlError, FencepostError, LeaseLostError, type ProblemBody } from "./errors.js";
export * from "./errors_gen.js";
export { Lease, withCurrentTask, withNextTask, withTask, type HoldOptions } from "./lease.js";
export { stopOf, type LeaseEvent } from "./stream.js";
