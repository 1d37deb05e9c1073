// The bounded in-memory store, with the refusal rule of Go's MemStore: a
// task's max_seen is never evicted (a full task table refuses new tasks
// with store-full); completed idempotency records are evicted least
// recently used first and after a TTL, running ones never (all slots
// running -> store-full). Writes to one task run one at a time; a
// duplicate key arriving while the first runs gets 409 in progress.

import { FenceError, stale } from "./problems.js";
import { FenceResponse, Outcome, Store, Write, WriteFn, recordable, replayable, writeFailed } from "./validator.js";

interface Task {
  maxSeen: bigint;
  busy: boolean;
  waiters: (() => void)[];
}
interface Rec {
  fp: string;
  done: boolean;
  resp?: FenceResponse;
  used: number;
}

export interface MemStoreOptions {
  maxTasks?: number;
  maxIdempotencyRecords?: number;
  /** Seconds a completed record is kept after its last use (default 24 h). */
  idempotencyTTL?: number;
  now?: () => number;
}

export class MemStore implements Store {
  private readonly tasks = new Map<string, Task>();
  // Insertion order is the LRU order of completed records (re-inserted on use).
  private readonly idem = new Map<string, Rec>();
  private readonly maxTasks: number;
  private readonly maxRecs: number;
  private readonly ttl: number;
  private readonly now: () => number;

  constructor(o: MemStoreOptions = {}) {
    this.maxTasks = o.maxTasks ?? 100_000;
    this.maxRecs = o.maxIdempotencyRecords ?? 100_000;
    this.ttl = o.idempotencyTTL ?? 24 * 3600;
    this.now = o.now ?? (() => performance.now() / 1000);
    if (!(this.maxTasks > 0 && this.maxRecs > 0 && this.ttl > 0)) throw new Error("fence: MemStore sizes and TTL must be positive");
  }

  maxSeen(task: string, tenant = ""): bigint | undefined {
    return this.tasks.get(tenant + "\0" + task)?.maxSeen;
  }

  private claim(w: Write, k: string): { rec?: Rec; replay?: FenceResponse } {
    const now = this.now();
    for (const [key, r] of this.idem) {
      if (!r.done) continue;
      if (now - r.used < this.ttl) break;
      this.idem.delete(key);
    }
    const fp = w.fingerprint.toString("hex");
    const rec = this.idem.get(k);
    if (rec) {
      if (!rec.done) throw new FenceError("idempotency-in-progress", `fence: idempotent request in progress: key ${JSON.stringify(w.idempotencyKey)}`);
      if (rec.fp !== fp) throw new FenceError("idempotency-payload-mismatch", `fence: idempotency key reused with a different payload: key ${JSON.stringify(w.idempotencyKey)}`);
      rec.used = now;
      this.idem.delete(k);
      this.idem.set(k, rec);
      return { replay: rec.resp };
    }
    if (this.idem.size >= this.maxRecs) {
      let evicted = false;
      for (const [key, r] of this.idem) {
        if (r.done) {
          this.idem.delete(key);
          evicted = true;
          break;
        }
      }
      if (!evicted) throw new FenceError("store-full", `fence: store full: ${this.idem.size} idempotency records, all in progress`);
    }
    const r: Rec = { fp, done: false, used: now };
    this.idem.set(k, r);
    return { rec: r };
  }

  private release(k: string, rec?: Rec) {
    if (rec && this.idem.get(k) === rec) this.idem.delete(k);
  }

  async do(w: Write, fn: WriteFn): Promise<{ response: FenceResponse; outcome: Outcome }> {
    const tk = w.tenant + "\0" + w.task;
    const ik = tk + "\0" + w.idempotencyKey;
    let t = this.tasks.get(tk);
    if (!t) {
      if (this.tasks.size >= this.maxTasks) {
        throw new FenceError("store-full", `fence: store full: task table holds ${this.tasks.size} tasks; max_seen is never evicted`);
      }
      t = { maxSeen: 0n, busy: false, waiters: [] };
      this.tasks.set(tk, t);
    }
    let rec: Rec | undefined;
    for (let first = true; ; first = false) {
      // Checked again after every wait: a higher epoch may have been accepted meanwhile.
      if (w.epoch < t.maxSeen) {
        this.release(ik, rec);
        this.handOn(t);
        throw stale(w.epoch, t.maxSeen);
      }
      if (first && w.idempotencyKey) {
        const c = this.claim(w, ik);
        if (c.replay) {
          t.maxSeen = w.epoch;
          return { response: c.replay, outcome: "replayed" };
        }
        rec = c.rec;
      }
      if (!t.busy) break;
      await new Promise<void>((resolve) => t!.waiters.push(resolve));
    }
    t.busy = true;
    t.maxSeen = w.epoch;
    let resp: FenceResponse | undefined;
    try {
      resp = await fn(undefined);
    } catch (e) {
      throw writeFailed(e);
    } finally {
      if (rec && resp && recordable(resp)) {
        rec.done = true;
        rec.resp = replayable(resp);
        rec.used = this.now();
        this.idem.delete(ik); // most recently used goes last
        this.idem.set(ik, rec);
      } else {
        this.release(ik, rec);
      }
      t.busy = false;
      this.handOn(t);
    }
    return { response: resp, outcome: "executed" };
  }

  private handOn(t: Task) {
    if (!t.busy) t.waiters.shift()?.();
  }
}
