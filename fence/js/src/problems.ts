// Rejections of the decision table (fence/SPEC.md section 4): one error
// class carrying the problem reason, and the one table of statuses and
// titles (the same as fence/validator_problem.go, checked against the
// vectors' "problems" list).

/** Media type of every rejection (RFC 9457). */
export const PROBLEM_CONTENT_TYPE = "application/problem+json";
/** Prefix of every problem type URI. */
export const PROBLEM_BASE = "https://fencepost.dev/problems/";

/** reason -> [status, title]. */
export const TABLE: Record<string, [number, string]> = {
  "missing-token": [400, "Missing fencing token"],
  "malformed-token": [400, "Malformed fencing token"],
  "missing-task": [400, "Missing task id"],
  "malformed-task": [400, "Malformed task id"],
  "malformed-holder": [400, "Malformed holder id"],
  "missing-signature": [403, "Missing token signature"],
  "bad-signature": [403, "Bad token signature"],
  "unknown-key": [403, "Unknown signing key"],
  "scope-rejected": [403, "Task not allowed here"],
  "invalid-idempotency-key": [400, "Invalid Idempotency-Key"],
  "body-too-large": [413, "Request body too large"],
  "stale-token": [409, "Stale fencing token"],
  "idempotency-in-progress": [409, "Idempotent request in progress"],
  "idempotency-payload-mismatch": [422, "Idempotency-Key reused with a different payload"],
  "store-full": [503, "Fencing store full"],
  "store-failure": [503, "Fencing store failure"],
  "write-failed": [500, "Write failed"],
};

/** A rejection; `reason` is the tail of the problem type. */
export class FenceError extends Error {
  constructor(readonly reason: string, message: string, readonly maxSeen?: bigint) {
    super(message);
    this.name = "FenceError";
  }
}

/** The stale-token rejection: the sender was replaced. */
export function stale(epoch: bigint, maxSeen: bigint): FenceError {
  return new FenceError("stale-token", `fence: stale fencing token: epoch ${epoch} is lower than max seen ${maxSeen}`, maxSeen);
}

/** An RFC 9457 problem document. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  max_seen_epoch?: string;
}

/** The problem of an error; anything that is not a FenceError is store-failure. */
export function problemFor(err: unknown): Problem {
  const fe = err instanceof FenceError ? err : undefined;
  const reason = fe && TABLE[fe.reason] ? fe.reason : "store-failure";
  const [status, title] = TABLE[reason];
  const p: Problem = { type: PROBLEM_BASE + reason, title, status, detail: err instanceof Error ? err.message : String(err) };
  if (fe?.maxSeen !== undefined) p.max_seen_epoch = fe.maxSeen.toString();
  return p;
}
