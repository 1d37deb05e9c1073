// The verdict on the active OpenTelemetry span, with the real
// @opentelemetry/api (a dev dependency here, an optional peer for users) and
// a context manager over AsyncLocalStorage, as the Node SDK registers one.

import assert from "node:assert/strict";
import { AsyncLocalStorage } from "node:async_hooks";
import { test } from "node:test";
import { context, trace, type Context, type ContextManager, type Span } from "@opentelemetry/api";
import { MemStore, Validator, otelAvailable, type FenceRequest } from "../src/index.js";

class ALSContextManager implements ContextManager {
  private als = new AsyncLocalStorage<Context>();
  constructor(private root: Context) {}
  active(): Context {
    return this.als.getStore() ?? this.root;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(ctx: Context, fn: F, thisArg?: ThisParameterType<F>, ...args: A): ReturnType<F> {
    return this.als.run(ctx, () => fn.call(thisArg, ...args));
  }
  bind<T>(_ctx: Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    return this;
  }
}

/** A recording span that keeps what is set on it. */
function fakeSpan(recording = true): Span & { attrs: Record<string, unknown> } {
  const attrs: Record<string, unknown> = {};
  const s = trace.wrapSpanContext({ traceId: "0af7651916cd43dd8448eb211c80319c", spanId: "b7ad6b7169203331", traceFlags: 1 });
  return Object.assign(Object.create(s), {
    attrs,
    isRecording: () => recording,
    setAttributes(a: Record<string, unknown>) {
      Object.assign(attrs, a);
      return this;
    },
  });
}

function write(epoch: string, key = ""): FenceRequest {
  const h: Record<string, string[]> = { "x-fencing-token": [epoch], "x-fencing-task": ["t1"] };
  if (key) h["idempotency-key"] = [key];
  return { method: "POST", target: "/w", getAll: (n) => h[n.toLowerCase()] ?? [], body: async () => Buffer.from("x") };
}

const ok = async () => ({ status: 201, headers: [] as [string, string][], body: Buffer.from("ok") });

test("verdicts land on the active span", async () => {
  assert.ok(otelAvailable());
  assert.ok(context.setGlobalContextManager(new ALSContextManager(context.active())));
  try {
    const v = new Validator({ store: new MemStore() });
    const under = async (span: Span, req: FenceRequest) => context.with(trace.setSpan(context.active(), span), () => v.check(req, ok));

    const a = fakeSpan();
    assert.equal((await under(a, write("5", "k1"))).response.status, 201);
    assert.deepEqual(a.attrs, { "fencepost.fence.verdict": "accepted", "fencepost.task.id": "t1", "fencepost.lease.epoch": "5", "fencepost.idempotency_key": "k1" });

    const b = fakeSpan();
    await under(b, write("5", "k1"));
    assert.equal(b.attrs["fencepost.fence.verdict"], "replayed");

    const c = fakeSpan();
    assert.equal((await under(c, write("4"))).response.status, 409);
    assert.equal(c.attrs["fencepost.fence.verdict"], "stale-token");
    assert.equal(c.attrs["fencepost.fence.max_seen_epoch"], "5");

    const quiet = fakeSpan(false);
    await under(quiet, write("6"));
    assert.deepEqual(quiet.attrs, {}, "a span that does not record is left alone");

    // Outside any span: nothing to record on, and the write still goes.
    assert.equal((await v.check(write("7"), ok)).response.status, 201);
  } finally {
    context.disable();
  }
});
