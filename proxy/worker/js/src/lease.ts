// Holding a task in a block: withTask / withNextTask / withCurrentTask and
// the Lease the work gets.

import { Client, type Grant } from "./client.js";
import { ControlError, FencepostError, LeaseLostError } from "./errors.js";
import { StaleEpochError, TaskWaitingError } from "./errors_gen.js";
import { Attach, type LeaseEvent } from "./stream.js";

const WAIT_POLL_MIN_MS = 100;
const WAIT_POLL_MAX_MS = 1000;

/** Options of withTask, withNextTask and withCurrentTask. */
export interface HoldOptions {
  /** The control API (default: a Client of FENCEPOST_CONTROL_URL). */
  client?: Client;
  /** withTask: create the task when the cluster does not know it. */
  create?: boolean;
  /** What a block that throws does to the lease: "fail" (default) or "giveBack". Never completes. */
  onError?: "fail" | "giveBack";
  /** Called with every event of the task's attach stream, in order. */
  onEvent?: (ev: LeaseEvent) => void;
}

function asJSON(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** One held task. Pass `lease.signal` to fetch and other abortable calls: it is
 * aborted (reason: a LeaseLostError) the moment the sidecar says stop. */
export class Lease {
  /** The lease's epoch (its fencing token); grows when resumed after waitExternal. */
  epoch = 0;
  /** The checkpoint data handed over with the lease, undefined on a fresh task. */
  resumedFrom: unknown = undefined;
  /** The signal data the last waitExternal resumed with. */
  signalData: unknown = undefined;
  /** The loss, once the lease is over. */
  error: LeaseLostError | undefined;
  private readonly ac = new AbortController();
  private attach: Attach | undefined;
  /** @internal */ ended = false;
  private pending: Pick<LeaseEvent, "kind" | "reason" | "epoch"> | undefined;

  constructor(
    private readonly client: Client,
    readonly taskId: string,
    private readonly onEvent?: (ev: LeaseEvent) => void,
  ) {}

  /** Aborted when the lease is lost. */
  get signal(): AbortSignal {
    return this.ac.signal;
  }

  /** Whether the lease is lost. */
  get lost(): boolean {
    return this.error !== undefined;
  }

  /** @internal */
  stop(ev: Pick<LeaseEvent, "kind" | "reason" | "epoch">): void {
    if (this.error) return;
    if (this.ended) {
      // The worker is ending this epoch itself (complete, fail, give back, wait): a
      // stop now is the sidecar seeing that end. It counts only if the call fails.
      this.pending = ev;
      return;
    }
    this.error = new LeaseLostError({ code: "lease_lost", title: ev.kind, detail: `${ev.kind} ${ev.reason ?? ""}`.trim(), epoch: ev.epoch });
    this.ac.abort(this.error);
    // The epoch is over: detach at once, so this stream cannot tie the next owner's
    // grant of the task (the sidecar ties what a stream told its worker of).
    this.closeAttach();
  }

  /** Throw the LeaseLostError when the lease is over. */
  check(): void {
    if (this.error) throw this.error;
  }

  private async call(path: string, body: Record<string, unknown>): Promise<void> {
    this.check();
    try {
      await this.client.call(path, body);
    } catch (e) {
      if (e instanceof LeaseLostError) this.stop({ kind: "lost", reason: e.code, epoch: this.epoch });
      throw e;
    }
  }

  private unend(): void {
    this.ended = false;
    const ev = this.pending;
    this.pending = undefined;
    if (ev) this.stop(ev);
  }

  /** @internal */
  async take(g: Grant): Promise<void> {
    this.epoch = g.lease.epoch;
    if (g.checkpointData !== undefined && g.checkpointData !== null) this.resumedFrom = g.checkpointData;
    this.signalData = g.task?.signal ? asJSON(Buffer.from(g.task.signal, "base64").toString("utf8")) : undefined;
    // A resumed block keeps its stream; waitExternal moves it to the new epoch.
    this.attach ??= await new Attach(this.client, this.taskId, this.epoch, this.onEvent, (ev) => this.stop(ev)).open();
  }

  /** @internal */
  closeAttach(): void {
    this.attach?.close();
    this.attach = undefined;
  }

  /** Durable progress under this epoch; data (any JSON value) is the next owner's resumedFrom. */
  checkpoint(step: string, data?: unknown): Promise<void> {
    return this.call("/v1/checkpoint", { taskId: this.taskId, step, data });
  }

  /** Mark progress without a checkpoint (carried by the next heartbeat). */
  progress(): Promise<void> {
    return this.call("/v1/progress", { taskId: this.taskId });
  }

  /** End the lease with the task completed; result is any JSON value. */
  complete(result?: unknown): Promise<void> {
    return this.end("/v1/complete", { taskId: this.taskId, result });
  }

  /** End the lease with the task failed. */
  fail(reason = ""): Promise<void> {
    return this.end("/v1/fail", { taskId: this.taskId, reason });
  }

  /** End the lease; the task is claimable again at once. */
  giveBack(): Promise<void> {
    return this.end("/v1/giveback", { taskId: this.taskId });
  }

  private async end(path: string, body: Record<string, unknown>): Promise<void> {
    this.check();
    if (this.ended) throw new FencepostError("fencepost: the lease was already completed, failed or given back");
    this.ended = true;
    try {
      await this.call(path, body);
    } catch (e) {
      this.unend();
      throw e;
    }
    this.closeAttach();
  }

  /** Park the task until a signal (fencepost ctl tasks signal) or timeoutMs (0: none),
   * then take it again under a new epoch; resolves to the signal's data. */
  async waitExternal(timeoutMs = 0): Promise<unknown> {
    this.check();
    this.ended = true;
    try {
      await this.call("/v1/wait", { taskId: this.taskId, timeoutMs });
    } catch (e) {
      this.unend();
      throw e;
    }
    // The attach stream stays open: nothing is held while waiting, and the same stream
    // ties the next grant.
    for (let poll = WAIT_POLL_MIN_MS; ; poll = Math.min(poll * 2, WAIT_POLL_MAX_MS)) {
      let g: Grant;
      try {
        g = await this.client.acquire(this.taskId);
      } catch (e) {
        if (!(e instanceof TaskWaitingError) && !(e instanceof ControlError && e.retryable)) throw e;
        await new Promise((r) => setTimeout(r, poll));
        continue;
      }
      await this.take(g);
      this.ended = false;
      this.pending = undefined;
      this.attach?.setEpoch(this.epoch); // fires a stop for the new epoch seen meanwhile
      return this.signalData;
    }
  }
}

async function hold<T>(get: (c: Client) => Promise<[string, Grant]>, fn: (lease: Lease) => Promise<T>, o: HoldOptions): Promise<T> {
  const client = o.client ?? new Client();
  const [taskId, g] = await get(client);
  const lease = new Lease(client, taskId, o.onEvent);
  try {
    await lease.take(g);
  } catch (e) {
    // Without the stream the work could not be stopped: do not start it.
    await client.call("/v1/giveback", { taskId }).catch(() => undefined);
    throw e;
  }
  let result: T;
  try {
    result = await fn(lease);
  } catch (e) {
    if (lease.error) {
      lease.closeAttach();
      throw e instanceof LeaseLostError || (e as Error)?.name === "AbortError" ? lease.error : e;
    }
    try {
      if (!lease.ended) await (o.onError === "giveBack" ? lease.giveBack() : lease.fail(String((e as Error)?.message ?? e)));
    } finally {
      lease.closeAttach();
    }
    throw e;
  }
  try {
    if (lease.error) throw lease.error;
    if (!lease.ended) await lease.complete();
  } finally {
    lease.closeAttach();
  }
  return result;
}

/** Acquire taskId and run fn under the lease. fn's lease.signal aborts the moment the
 * sidecar says stop; fn resolving completes the task (unless fn ended the lease), fn
 * throwing fails it or gives it back (never completes it); a lost lease rejects with
 * LeaseLostError. */
export function withTask<T>(taskId: string, fn: (lease: Lease) => Promise<T>, o: HoldOptions = {}): Promise<T> {
  return hold(async (c) => [taskId, await c.acquire(taskId, o.create ?? false)], fn, o);
}

/** Claim the next claimable task and run fn under its lease (NoTaskError when none). */
export function withNextTask<T>(fn: (lease: Lease) => Promise<T>, o: HoldOptions = {}): Promise<T> {
  return hold(async (c) => {
    const g = await c.claim();
    return [g.lease.taskId || g.task.taskId, g];
  }, fn, o);
}

/** One-task mode (`fencepost run`): run fn under the lease the sidecar already holds,
 * the task FENCEPOST_TASK names or else the only one GET /v1/lease shows; resumedFrom
 * is FENCEPOST_CHECKPOINT. */
export function withCurrentTask<T>(fn: (lease: Lease) => Promise<T>, o: HoldOptions = {}): Promise<T> {
  return hold(async (c) => {
    const want = process.env.FENCEPOST_TASK ?? "";
    const views = await c.leases(want);
    if (views.length !== 1) {
      throw new FencepostError(`fencepost: one-task mode: FENCEPOST_TASK=${JSON.stringify(want)} and the sidecar holds ${views.length} matching leases, not one`);
    }
    const epoch = process.env.FENCEPOST_EPOCH;
    if (want && epoch && /^\d+$/.test(epoch) && Number(epoch) !== views[0].epoch) {
      throw new StaleEpochError({ code: StaleEpochError.code, status: 409, epoch: views[0].epoch,
        detail: `FENCEPOST_EPOCH is ${epoch}, the sidecar holds epoch ${views[0].epoch}` });
    }
    const g: Grant = { lease: views[0], task: { taskId: views[0].taskId } };
    const cp = process.env.FENCEPOST_CHECKPOINT;
    if (cp) g.checkpointData = asJSON(cp);
    return [views[0].taskId, g];
  }, fn, o);
}
