// The decision table of fence/SPEC.md section 4: the stateless checks
// (rows 1-11) here, the stateful ones (12-17) in the stores, and the one
// function every middleware calls.

import { createHash } from "node:crypto";
import { annotate } from "./otel.js";
import { FenceError, Problem, problemFor } from "./problems.js";
import { KeySet, verifySignature } from "./sign.js";
import * as tk from "./token.js";

export const DEFAULT_MAX_BODY_BYTES = 8 << 20;
const SAFE = new Set(["GET", "HEAD", "OPTIONS", "TRACE"]);
/** Response headers never recorded for replay (hop-by-hop, per response, cookies). */
export const UNREPLAYABLE = new Set(["connection", "keep-alive", "proxy-authenticate", "proxy-connection", "te", "trailer",
  "transfer-encoding", "upgrade", "date", "content-length", "set-cookie"]);

/** One fenced write as a store sees it. */
export interface Write {
  tenant: string;
  task: string;
  /** The fencing token. A bigint, because epochs go up to 2^64-1: JSON.stringify throws on it and Number() rounds it past 2^53, so put epochString in JSON. */
  epoch: bigint;
  /** The epoch as decimal text, exactly as X-Fencing-Token carried it: JSON-safe (`res.json({ epoch: w.epochString })`). */
  epochString: string;
  holder: string;
  idempotencyKey: string;
  fingerprint: Buffer;
}

/** A handler's response; headers are [name, value] pairs. */
export interface FenceResponse {
  status: number;
  headers: [string, string][];
  body: Buffer;
}

export type Outcome = "executed" | "replayed";

/** Runs the write; tx is the store's transaction client (undefined for memory). */
export type WriteFn = (tx: unknown) => Promise<FenceResponse>;

/** A store: the epoch check, idempotency and the write, atomically per task. */
export interface Store {
  do(w: Write, fn: WriteFn): Promise<{ response: FenceResponse; outcome: Outcome }>;
}

export function recordable(r: FenceResponse): boolean {
  return r.status < 500;
}

/** Go's canonical header spelling, so records are shared with the Go sqlstore. */
export function canonicalHeader(name: string): string {
  return name.split("-").map((p) => p.slice(0, 1).toUpperCase() + p.slice(1).toLowerCase()).join("-");
}

/** The copy of a response that is recorded for replay. */
export function replayable(r: FenceResponse): FenceResponse {
  return {
    status: r.status,
    headers: r.headers.filter(([k]) => !UNREPLAYABLE.has(k.toLowerCase())).map(([k, v]) => [canonicalHeader(k), v]),
    body: Buffer.from(r.body),
  };
}

/** SHA-256 over "fencepost-payload-v1\n" + method + "\n" + target + "\n" + body. */
export function payloadFingerprint(method: string, target: string, body: Buffer): Buffer {
  return createHash("sha256").update("fencepost-payload-v1\n").update(tk.bytesOf(`${method}\n${target}\n`)).update(body).digest();
}

export function defaultIsWrite(method: string): boolean {
  return !SAFE.has(method.toUpperCase());
}

export interface FenceOptions {
  store: Store;
  /** Turns signature checks on (StaticKeys, KeyFetcher). */
  keys?: KeySet;
  /** With keys: still accept unsigned writes (migrations only). */
  allowUnsigned?: boolean;
  isWrite?: (method: string, path: string) => boolean;
  maxBodyBytes?: number;
  /** Sees every decision on a write (metrics). With @opentelemetry/api installed the verdict also lands on the active span (otel.ts). */
  observer?: (d: { write?: Write; status: number; problem?: Problem; outcome?: Outcome }) => void;
}

/** Every value of a header (lower-case name). */
export type GetAll = (name: string) => string[];

function one(values: string[], missing: string | null, repeated: string, name: string): string | undefined {
  if (values.length === 0) {
    if (missing) throw new FenceError(missing, `fence: missing ${name}`);
    return undefined;
  }
  if (values.length > 1) throw new FenceError(repeated, `fence: header ${name} repeated`);
  return values[0];
}

/** One request as a middleware hands it over. */
export interface FenceRequest {
  method: string;
  target: string;
  getAll: GetAll;
  /** Reads the body within the limit; called only with an Idempotency-Key. */
  body: (limit: number) => Promise<Buffer>;
  /** Names the tenant or throws (403 scope-rejected). */
  scope?: (task: string) => string;
}

export type Decision = { write?: Write; response: FenceResponse; outcome?: Outcome; problem?: Problem };

/** Applies the decision table; one per service. */
export class Validator {
  readonly maxBodyBytes: number;
  constructor(readonly opts: FenceOptions) {
    if (!opts.store) throw new Error("fence: options.store is required");
    this.maxBodyBytes = opts.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    if (!(this.maxBodyBytes > 0)) throw new Error("fence: options.maxBodyBytes must be positive");
  }

  isWrite(method: string, path: string): boolean {
    return (this.opts.isWrite ?? defaultIsWrite)(method, path);
  }

  /** Rows 1-9, in order: token, task, holder, signature, key syntax. */
  async parse(getAll: GetAll): Promise<Write> {
    const epoch = tk.parseEpoch(one(getAll(tk.HEADER_TOKEN), "missing-token", "malformed-token", "X-Fencing-Token")!);
    const task = tk.validTask(one(getAll(tk.HEADER_TASK), "missing-task", "malformed-task", "X-Fencing-Task")!);
    const h = one(getAll(tk.HEADER_HOLDER), null, "malformed-holder", "X-Fencing-Holder");
    const holder = h === undefined ? { text: "", bytes: Buffer.alloc(0) } : tk.validHolder(h);
    if (this.opts.keys) {
      const sig = one(getAll(tk.HEADER_SIGNATURE), null, "bad-signature", "X-Fencing-Signature");
      if (sig === undefined) {
        if (!this.opts.allowUnsigned) throw new FenceError("missing-signature", "fence: missing token signature");
      } else {
        await verifySignature(this.opts.keys, sig, task.bytes, epoch, holder.bytes);
      }
    }
    const k = one(getAll(tk.HEADER_IDEMPOTENCY_KEY), null, "invalid-idempotency-key", "Idempotency-Key");
    const key = k === undefined ? "" : tk.validIdempotencyKey(k);
    return { tenant: "", task: task.text, epoch, epochString: epoch.toString(), holder: holder.text, idempotencyKey: key, fingerprint: Buffer.alloc(0) };
  }

  /** The whole table for one write; fn runs the service's handler. */
  async check(req: FenceRequest, fn: (tx: unknown, w: Write) => Promise<FenceResponse>): Promise<Decision> {
    let w: Write | undefined;
    try {
      w = await this.parse(req.getAll);
      if (req.scope) {
        try {
          w.tenant = req.scope(w.task);
        } catch (e) {
          throw e instanceof FenceError ? e : new FenceError("scope-rejected", `fence: task not allowed in this scope: ${(e as Error).message}`);
        }
      }
      if (w.idempotencyKey) w.fingerprint = payloadFingerprint(req.method, req.target, await req.body(this.maxBodyBytes));
      const accepted = w;
      const { response, outcome } = await this.opts.store.do(w, (tx) => fn(tx, accepted));
      this.opts.observer?.({ write: w, status: response.status, outcome });
      annotate({ write: w, outcome });
      return { write: w, response, outcome };
    } catch (e) {
      const problem = problemFor(e);
      this.opts.observer?.({ write: w, status: problem.status, problem });
      annotate({ write: w, problem });
      return { write: w, problem, response: problemResponse(problem) };
    }
  }
}

export function problemResponse(p: Problem): FenceResponse {
  return { status: p.status, headers: [["Content-Type", "application/problem+json"]], body: Buffer.from(JSON.stringify(p)) };
}

export function tooLarge(limit: number): FenceError {
  return new FenceError("body-too-large", `fence: request body too large: more than ${limit} bytes`);
}

export function writeFailed(e: unknown): FenceError {
  return new FenceError("write-failed", `fence: write failed: ${(e as Error)?.message ?? e}`);
}
