// Express (and plain node:http) middleware: fences every write. The
// handler's response is buffered so it commits with the fencing state and
// can be recorded for replay; the accepted write is `req.fence.write` and,
// with PgStore, the transaction's client `req.fence.tx`.
//
//   app.use(express.json({ verify: captureRawBody }));   // keeps the bytes for the fingerprint
//   app.use(fenceExpress({ store: new MemStore() }));

import type { IncomingMessage, ServerResponse } from "node:http";
import { FenceError } from "./problems.js";
import { HEADER_REPLAYED } from "./token.js";
import { Decision, FenceOptions, FenceResponse, Validator, Write, tooLarge } from "./validator.js";

type Req = IncomingMessage & { originalUrl?: string; body?: unknown; rawBody?: Buffer; fence?: { write: Write; tx: unknown } };
type Next = (err?: unknown) => void;

/** A `verify` hook for express.json / express.text / express.urlencoded that keeps the raw body. */
export function captureRawBody(req: IncomingMessage, _res: unknown, buf: Buffer): void {
  (req as Req).rawBody = buf;
}

export interface ExpressFenceOptions extends FenceOptions {
  /** Names the tenant of a task for this request, or throws (403 scope-rejected). */
  scope?: (req: IncomingMessage, task: string) => string;
}

async function readBody(req: Req, limit: number): Promise<Buffer> {
  let b: Buffer | undefined = req.rawBody ?? (Buffer.isBuffer(req.body) ? req.body : undefined);
  if (!b) {
    if (req.readableEnded) {
      throw new FenceError("store-failure", "fence: the body was consumed before the fence: mount it first, or parse with { verify: captureRawBody }");
    }
    const chunks: Buffer[] = [];
    let n = 0;
    for await (const c of req) {
      n += (c as Buffer).length;
      if (n > limit) throw tooLarge(limit);
      chunks.push(c as Buffer);
    }
    b = Buffer.concat(chunks);
    req.rawBody = b;
    if (req.body === undefined) req.body = b;
  }
  if (b.length > limit) throw tooLarge(limit);
  return b;
}

/** Runs next() with res captured; resolves with the handler's response. */
function runCaptured(req: Req, res: ServerResponse, next: Next): { done: Promise<FenceResponse>; restore: () => void } {
  const orig = { writeHead: res.writeHead, write: res.write, end: res.end };
  const chunks: Buffer[] = [];
  const toBuf = (c: unknown, enc?: unknown) => (Buffer.isBuffer(c) ? c : Buffer.from(c as string, typeof enc === "string" ? (enc as BufferEncoding) : "utf8"));
  let finish!: () => void;
  const ended = new Promise<void>((r) => (finish = r));
  const r = res as any;
  r.writeHead = (status: number, ...rest: any[]) => {
    res.statusCode = status;
    const h = rest.find((x) => x && typeof x === "object");
    if (Array.isArray(h)) for (let i = 0; i + 1 < h.length; i += 2) res.setHeader(h[i], h[i + 1]);
    else if (h) for (const [k, v] of Object.entries(h)) res.setHeader(k, v as string);
    return res;
  };
  r.write = (c: unknown, enc?: unknown, cb?: unknown) => {
    if (c != null) chunks.push(toBuf(c, enc));
    [enc, cb].find((f) => typeof f === "function")?.();
    return true;
  };
  r.end = (c?: unknown, enc?: unknown, cb?: unknown) => {
    if (c != null && typeof c !== "function") chunks.push(toBuf(c, enc));
    finish();
    return res;
  };
  const done = (async () => {
    next();
    await ended;
    const headers: [string, string][] = [];
    for (const [k, v] of Object.entries(res.getHeaders())) {
      for (const x of Array.isArray(v) ? v : [v]) if (x !== undefined) headers.push([k, String(x)]);
    }
    return { status: res.statusCode, headers, body: Buffer.concat(chunks) };
  })();
  return { done, restore: () => Object.assign(res, orig) };
}

function send(res: ServerResponse, d: Decision, restore?: () => void) {
  restore?.();
  const r = d.response;
  if (d.outcome !== "executed") {
    for (const name of res.getHeaderNames()) res.removeHeader(name);
    for (const [k, v] of r.headers) res.appendHeader(k, v);
    if (d.outcome === "replayed") res.setHeader(HEADER_REPLAYED, "true");
  }
  res.statusCode = r.status;
  res.setHeader("Content-Length", r.body.length);
  res.end(r.body);
}

/** The middleware; options are those of Validator plus an optional scope hook. */
export function fenceExpress(opts: ExpressFenceOptions) {
  const v = new Validator(opts);
  return (req: Req, res: ServerResponse, next: Next) => {
    const target = req.originalUrl ?? req.url ?? "/";
    if (!v.isWrite(req.method ?? "GET", target.split("?")[0])) return next();
    let restore: (() => void) | undefined;
    v.check({
      method: req.method ?? "POST",
      target,
      getAll: (name) => req.headersDistinct[name] ?? [],
      body: (limit) => readBody(req, limit),
      scope: opts.scope && ((task) => opts.scope!(req, task)),
    }, (tx, write) => {
      req.fence = { write, tx };
      const c = runCaptured(req, res, next);
      restore = c.restore;
      return c.done;
    }).then((d) => send(res, d, restore), next);
  };
}
