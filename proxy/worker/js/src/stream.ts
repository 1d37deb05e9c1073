// The attach stream: GET /v1/attach?task=T kept open for one epoch and
// reconnected with Last-Event-ID; the first stop the sidecar sends calls
// onStop at once.

import http from "node:http";
import { type Client, problemError } from "./client.js";

/** One event of the stream (the contract's data JSON, plus the SSE id). */
export interface LeaseEvent {
  id: string;
  kind: "state" | "acquired" | "lost" | "revived" | "revoked" | "released" | string;
  taskId: string;
  epoch: number;
  reason?: string;
  at?: string;
  stop: boolean;
  seq?: number;
}

const RECONNECT_MIN_MS = 20;
const RECONNECT_MAX_MS = 1000;
/** A stream silent this long is taken for dead and reconnected: three of the sidecar's 15 s keepalives. */
const STREAM_IDLE_MS = 45_000;

/** The one rule for "stop now": the event's stop field; a sidecar older than the
 * contract sends none, and then lost and revoked mean stop. */
export function stopOf(ev: Partial<LeaseEvent>): boolean {
  if (typeof ev.stop === "boolean") return ev.stop;
  return ev.kind === "lost" || ev.kind === "revoked";
}

/** The block's attach stream, kept across the epochs a waitExternal moves through (so
 * no close of an old stream can race the next grant). */
export class Attach {
  private path = "/v1/attach";
  private readonly future = new Map<number, LeaseEvent>(); // stops for an epoch newer than the one known yet
  private lastId = "";
  private req: http.ClientRequest | undefined;
  private closed = false;
  private wait = RECONNECT_MIN_MS;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly client: Client,
    readonly taskId: string,
    private epoch: number,
    private readonly onEvent: ((ev: LeaseEvent) => void) | undefined,
    private readonly onStop: (ev: LeaseEvent) => void,
  ) {}

  /** Connect; resolves once the stream answered, rejects when the first connection fails. */
  open(): Promise<this> {
    return new Promise((resolve, reject) => this.connect(() => resolve(this), reject));
  }

  /** Move to the lease's new epoch, firing a stop for it seen before the grant's reply. */
  setEpoch(epoch: number): void {
    this.epoch = epoch;
    const ev = this.future.get(epoch);
    this.future.clear();
    if (ev) this.onStop(ev);
  }

  /** End the stream cleanly (after the lease ended). */
  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.req?.destroy();
  }

  private connect(ready?: () => void, failed?: (e: Error) => void): void {
    if (this.closed) return;
    const headers: Record<string, string> = { Accept: "text/event-stream" };
    if (this.lastId) headers["Last-Event-ID"] = this.lastId;
    let up = false;
    const again = (e?: Error) => {
      if (this.closed) return;
      if (!up && failed) return failed(e ?? new Error("fencepost: attach: stream ended before it answered"));
      this.timer = setTimeout(() => this.connect(), this.wait);
      this.wait = Math.min(this.wait * 2, RECONNECT_MAX_MS);
    };
    // A dedicated agentless connection: a long-lived stream must not hold a pooled socket.
    const req = http.get(new URL(`${this.path}?task=${encodeURIComponent(this.taskId)}`, this.client.url), { headers, agent: false }, (res) => {
      if (res.statusCode === 404 && this.path === "/v1/attach") {
        // A sidecar from before the attach route: the events stream still says stop.
        res.resume();
        this.path = "/v1/events";
        return this.connect(ready, failed);
      }
      if (res.statusCode !== 200) {
        let t = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (t += c));
        res.on("end", () => again(problemError(res.statusCode ?? 0, t)));
        return;
      }
      up = true;
      this.wait = RECONNECT_MIN_MS;
      ready?.();
      ready = failed = undefined;
      res.setEncoding("utf8");
      let buf = "";
      res.on("data", (chunk: string) => {
        buf += chunk;
        let i: number;
        while ((i = buf.search(/\r?\n\r?\n/)) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + (buf[i] === "\r" ? 4 : 2));
          this.message(block);
        }
      });
      res.on("end", () => again());
      res.on("error", () => again());
    });
    req.setTimeout(STREAM_IDLE_MS, () => req.destroy(new Error("fencepost: attach: stream silent")));
    req.on("error", (e) => again(e));
    this.req = req;
  }

  private message(block: string): void {
    let id = "";
    let kind = "";
    const data: string[] = [];
    for (const line of block.split(/\r?\n/)) {
      if (line === "" || line.startsWith(":")) continue;
      const c = line.indexOf(":");
      const field = c < 0 ? line : line.slice(0, c);
      let val = c < 0 ? "" : line.slice(c + 1);
      if (val.startsWith(" ")) val = val.slice(1);
      if (field === "id") id = val;
      else if (field === "event") kind = val;
      else if (field === "data") data.push(val);
    }
    if (data.length === 0) return;
    if (id) this.lastId = id;
    let ev: LeaseEvent;
    try {
      ev = JSON.parse(data.join("\n")) as LeaseEvent;
    } catch {
      return;
    }
    ev.id = id;
    ev.kind ||= kind;
    if (ev.taskId && ev.taskId !== this.taskId) return;
    let stop = stopOf(ev);
    if (ev.kind === "state") {
      // A state that does not show this epoch held is a stop.
      stop = stop || !ev.taskId || ev.epoch !== this.epoch;
      ev.taskId = this.taskId;
    } else if (stop && ev.epoch > this.epoch) {
      this.future.set(ev.epoch, ev); // the grant's reply has not told us this epoch yet
      stop = false;
    }
    ev.stop = ev.stop || stop;
    this.onEvent?.(ev);
    if (stop && (ev.kind === "state" || !ev.epoch || ev.epoch === this.epoch)) this.onStop(ev);
  }
}
