// The worker SDKs' conformance scenario played with @fencepost/worker.
//   node proxy/worker/js/dist/js/test/conformance.js SCENARIO CONTROL_URL OPERATOR_URL TASK
// Prints one JSON transcript line per step (as the Go player does); exits 1 on
// the first mismatch with the scenario's expectations, 2 on bad usage.

import http from "node:http";
import { readFileSync } from "node:fs";
import { isDeepStrictEqual } from "node:util";
import { Client, ControlError, type Lease, withNextTask, withTask } from "../src/index.js";

const CANCEL_TIMEOUT_MS = 30_000;

interface Step {
  worker?: string;
  operator?: string;
  op?: string;
  create?: boolean;
  step?: string;
  data?: unknown;
  result?: unknown;
  timeoutMs?: number;
  expect?: Record<string, unknown>;
}

const code = (e: unknown) => (e === undefined ? null : e instanceof ControlError ? e.code : String(e));

/** One worker's block; ops run inside it, in order. */
class Actor {
  lease!: Lease;
  private queue: Array<(() => Promise<void>) | null> = [];
  private wake: (() => void) | undefined;
  readonly held: Promise<void>;
  readonly done: Promise<unknown>;

  constructor(hold: (fn: (l: Lease) => Promise<void>) => Promise<void>) {
    let held!: () => void;
    this.held = new Promise((r) => (held = r));
    this.done = hold(async (l) => {
      this.lease = l;
      held();
      for (;;) {
        while (this.queue.length === 0) await new Promise<void>((r) => (this.wake = r));
        const f = this.queue.shift()!;
        if (f === null) return;
        await f();
      }
    }).then(() => "ok", (e) => code(e));
    void this.done.then(() => held());
  }

  push(f: (() => Promise<void>) | null): void {
    this.queue.push(f);
    this.wake?.();
  }

  do<T>(f: () => Promise<T>): Promise<T> {
    return new Promise((resolve) => this.push(async () => resolve(await f())));
  }
}

function request(u: string, method: string, body?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = http.request(u, { method, agent: false }, (res) => {
      let t = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (t += c));
      res.on("end", () => ((res.statusCode ?? 0) / 100 === 2 || res.statusCode! < 300 ? resolve(t) : reject(new Error(`operator: ${res.statusCode} ${t}`))));
    });
    req.on("error", reject);
    req.end(body);
  });
}

const [, , scenarioPath, control, operator, task] = process.argv;
if (!task) {
  console.error("usage: conformance.js SCENARIO CONTROL_URL OPERATOR_URL TASK");
  process.exit(2);
}
const scenario = JSON.parse(readFileSync(scenarioPath, "utf8")) as { steps: Step[] };
const client = new Client(control);
const actors: Record<string, Actor> = {};
let maxEpoch = 0;
const epochIncreased = (e: number) => {
  const up = e > maxEpoch;
  maxEpoch = Math.max(maxEpoch, e);
  return up;
};

async function step(st: Step): Promise<Record<string, unknown>> {
  if (st.operator) {
    const u = `${operator}/${st.operator}?task=${encodeURIComponent(task)}`;
    if (st.operator === "task") return { state: JSON.parse(await request(u, "GET")).state };
    await request(u, "POST", st.data === undefined ? "" : JSON.stringify(st.data));
    return {};
  }
  const name = st.worker!;
  if (st.op === "acquire" || st.op === "claim") {
    const a = (actors[name] = new Actor((fn) => (st.op === "claim" ? withNextTask(fn, { client }) : withTask(task, fn, { client, create: st.create }))));
    await a.held;
    if (!a.lease) throw new Error(`the block did not start: ${await a.done}`);
    return { epochIncreased: epochIncreased(a.lease.epoch), resumedFrom: a.lease.resumedFrom ?? null };
  }
  const a = actors[name];
  if (st.op === "leave") {
    a.push(null);
    return { outcome: await a.done };
  }
  if (st.op === "await_cancelled") {
    const s = a.lease.signal;
    const ok = await new Promise<boolean>((r) => {
      if (s.aborted) return r(true);
      const t = setTimeout(() => r(false), CANCEL_TIMEOUT_MS);
      s.addEventListener("abort", () => (clearTimeout(t), r(true)));
    });
    return ok ? { cancelled: true, kind: a.lease.error!.title } : { cancelled: false };
  }
  return a.do(async () => {
    const l = a.lease;
    try {
      if (st.op === "checkpoint") await l.checkpoint(st.step ?? "", st.data);
      else if (st.op === "complete") await l.complete(st.result);
      else if (st.op === "wait_external") {
        const sig = await l.waitExternal(st.timeoutMs ?? 0);
        return { error: null, epochIncreased: epochIncreased(l.epoch), signal: sig ?? null };
      } else return { error: `unknown op ${st.op}` };
    } catch (e) {
      return { error: code(e) };
    }
    return { error: null };
  });
}

let exit = 0;
for (const [i, st] of scenario.steps.entries()) {
  const label = `step ${i} (${st.worker ?? ""}${st.operator ?? ""} ${st.op ?? ""})`;
  let got: Record<string, unknown>;
  try {
    got = JSON.parse(JSON.stringify(await step(st)));
  } catch (e) {
    console.error(`${label}: ${e}`);
    exit = 1;
    break;
  }
  const sorted = Object.fromEntries(Object.entries(got).sort(([x], [y]) => (x < y ? -1 : 1)));
  console.log(JSON.stringify({ got: sorted, step: i }));
  const bad = Object.entries(st.expect ?? {}).find(([k, want]) => !isDeepStrictEqual(got[k], want));
  if (bad) {
    console.error(`${label}: ${bad[0]} = ${JSON.stringify(got[bad[0]])}, want ${JSON.stringify(bad[1])}`);
    exit = 1;
    break;
  }
}
client.close();
process.exit(exit);
