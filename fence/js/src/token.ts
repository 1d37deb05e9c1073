// Header names and the syntax of tokens, task and holder ids and
// Idempotency-Keys (fence/SPEC.md section 2). Header values are "byte
// strings" as Node's HTTP parser delivers them (one character per byte,
// latin-1); a string with characters above U+00FF is taken as text and
// encoded as UTF-8.

import { FenceError } from "./problems.js";

export const HEADER_TOKEN = "x-fencing-token";
export const HEADER_TASK = "x-fencing-task";
export const HEADER_HOLDER = "x-fencing-holder";
export const HEADER_SIGNATURE = "x-fencing-signature";
export const HEADER_IDEMPOTENCY_KEY = "idempotency-key";
export const HEADER_REPLAYED = "idempotent-replayed";

export const MAX_TASK_LEN = 256;
export const MAX_IDEMPOTENCY_KEY_LEN = 255;
const MAX_EPOCH = (1n << 64n) - 1n;
const utf8 = new TextDecoder("utf-8", { fatal: true });

/** The bytes of a header value. */
export function bytesOf(v: string): Buffer {
  // eslint-disable-next-line no-control-regex
  return /[^\u0000-\u00ff]/.test(v) ? Buffer.from(v, "utf8") : Buffer.from(v, "latin1");
}

/** Parse a fencing token strictly: 1-20 ASCII digits, no leading zero, 1..2^64-1. */
export function parseEpoch(v: string): bigint {
  const bad = (why: string) => new FenceError("malformed-token", "fence: malformed fencing token: " + why);
  if (v === "") throw bad("empty");
  if (v.length > 20) throw bad("more than 20 digits");
  if (!/^[0-9]+$/.test(v)) throw bad("not a decimal digit");
  if (v[0] === "0") throw bad("zero or leading zero");
  const e = BigInt(v);
  if (e > MAX_EPOCH) throw bad("out of range");
  return e;
}

function validID(v: string, reason: string): { text: string; bytes: Buffer } {
  const b = bytesOf(v);
  const bad = (why: string) => new FenceError(reason, `fence: ${reason}: ${why}`);
  if (b.length === 0) throw bad("empty");
  if (b.length > MAX_TASK_LEN) throw bad(`longer than ${MAX_TASK_LEN} bytes`);
  let text: string;
  try {
    text = utf8.decode(b);
  } catch {
    throw bad("invalid UTF-8");
  }
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f-\u009f]/.test(text)) throw bad("control character");
  return { text, bytes: b };
}

/** A task id: 1..256 bytes of UTF-8 without control characters. */
export function validTask(v: string) {
  return validID(v, "malformed-task");
}

/** A holder id: the same syntax as a task id. */
export function validHolder(v: string) {
  return validID(v, "malformed-holder");
}

/** An Idempotency-Key: 1..255 bytes of visible ASCII 0x21-0x7E. */
export function validIdempotencyKey(v: string): string {
  const bad = (why: string) => new FenceError("invalid-idempotency-key", "fence: invalid idempotency key: " + why);
  if (v === "") throw bad("empty");
  if (v.length > MAX_IDEMPOTENCY_KEY_LEN) throw bad("longer than 255 bytes");
  if (!/^[\x21-\x7e]+$/.test(v)) throw bad("not visible ASCII");
  return v;
}
