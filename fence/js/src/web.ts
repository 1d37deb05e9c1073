// Wrapper for Web-standard Request -> Response handlers (Hono, Next.js
// route handlers, Deno, Bun, Node's fetch-style servers):
//
//   export const POST = withFence(async (req, { write }) => Response.json({ ok: true }), { store });
//
// Web Headers join a repeated header into one value ("a, b"): a repeated
// token, signature or key is still malformed, but a repeated task or
// holder id reads as one id containing ", " (the Express middleware keeps
// repeats apart).

import { HEADER_REPLAYED } from "./token.js";
import { FenceOptions, Validator, Write, tooLarge } from "./validator.js";

export interface WebFenceOptions extends FenceOptions {
  scope?: (req: Request, task: string) => string;
}

export type WebHandler = (req: Request, ctx: { write?: Write; tx?: unknown }) => Response | Promise<Response>;

const NULL_BODY = new Set([101, 103, 204, 205, 304]);

export function withFence(handler: WebHandler, opts: WebFenceOptions): (req: Request) => Promise<Response> {
  const v = new Validator(opts);
  return async (req) => {
    const url = new URL(req.url);
    if (!v.isWrite(req.method, url.pathname)) return handler(req, {});
    let body: Buffer | undefined;
    const d = await v.check({
      method: req.method,
      target: url.pathname + url.search,
      getAll: (name) => {
        const x = req.headers.get(name);
        return x === null ? [] : [x];
      },
      body: async (limit) => {
        const len = Number(req.headers.get("content-length") ?? "0");
        if (len > limit) throw tooLarge(limit);
        body = Buffer.from(await req.arrayBuffer());
        if (body.length > limit) throw tooLarge(limit);
        return body;
      },
      scope: opts.scope && ((task) => opts.scope!(req, task)),
    }, async (tx, write) => {
      const r = body === undefined ? req : new Request(req.url, { method: req.method, headers: req.headers, body: new Uint8Array(body) });
      const resp = await handler(r, { write, tx });
      const headers: [string, string][] = [];
      resp.headers.forEach((val, k) => k !== "set-cookie" && headers.push([k, val]));
      for (const c of resp.headers.getSetCookie()) headers.push(["set-cookie", c]);
      return { status: resp.status, headers, body: Buffer.from(await resp.arrayBuffer()) };
    });
    const h = new Headers();
    for (const [k, val] of d.response.headers) if (k.toLowerCase() !== "content-length") h.append(k, val);
    if (d.outcome === "replayed") h.set(HEADER_REPLAYED, "true");
    return new Response(NULL_BODY.has(d.response.status) ? null : new Uint8Array(d.response.body), { status: d.response.status, headers: h });
  };
}
