// The PostgreSQL store: the epoch check, the idempotency record and the
// service's own statements share one transaction, with the tables of the
// Go fence/sqlstore (Go, Python and TypeScript services can share a
// database). Works with a `pg` Pool (or anything with the same connect /
// query / release shape), so this package has no runtime dependency.
//
// Two ways to use it: `do(w, fn)` (the middlewares) takes a client from
// the pool, BEGINs, runs fn(client) and COMMITs; or, in a transaction you
// manage, `check(client, w)`, your statements, `record(client, w, resp)`,
// COMMIT. Writes to one task are serialised by the row lock of the epoch
// UPDATE, so a concurrent duplicate key waits for the first and replays.

import { FenceError, stale } from "./problems.js";
import { FenceResponse, Outcome, Store, Write, WriteFn, recordable, replayable, writeFailed } from "./validator.js";

/** The part of a pg client this store uses. */
export interface PgClient {
  query(text: string, values?: unknown[]): Promise<{ rowCount: number | null; rows: any[] }>;
  release?(err?: Error | boolean): void;
}
/** The part of a pg Pool this store uses. */
export interface PgPool {
  connect(): Promise<PgClient>;
}

const IDENT = /^[a-z_][a-z0-9_]{0,40}$/;
const MAX_ATTEMPTS = 4;

/** 20 zero-padded digits: text order is numeric order over all of uint64. */
export function encodeEpoch(e: bigint): string {
  return e.toString().padStart(20, "0");
}

function storeFailure(what: string, e: unknown): FenceError {
  return new FenceError("store-failure", `fence: store failure: ${what}: ${(e as Error)?.message ?? e}`);
}

export class PgStore implements Store {
  readonly schema: string[];
  private readonly q: Record<string, string>;

  constructor(private readonly pool?: PgPool, tablePrefix = "fence_", private readonly now: () => number = Date.now) {
    if (!IDENT.test(tablePrefix)) throw new Error(`fence: PgStore table prefix ${JSON.stringify(tablePrefix)} must match ${IDENT}`);
    const t = tablePrefix + "tasks", i = tablePrefix + "idempotency";
    this.schema = [
      `CREATE TABLE IF NOT EXISTS ${t} (\n\ttenant      TEXT NOT NULL,\n\ttask_id     TEXT NOT NULL,\n\tlease_epoch TEXT COLLATE "C" NOT NULL,\n` +
        `\tupdated_at  BIGINT NOT NULL,\n\tPRIMARY KEY (tenant, task_id))`,
      `CREATE TABLE IF NOT EXISTS ${i} (\n\ttenant      TEXT NOT NULL,\n\ttask_id     TEXT NOT NULL,\n\tidem_key    TEXT NOT NULL,\n` +
        `\tfingerprint TEXT NOT NULL,\n\tlease_epoch TEXT COLLATE "C" NOT NULL,\n\tstatus      INTEGER NOT NULL,\n\theader      TEXT NOT NULL,\n` +
        `\tbody        BYTEA NOT NULL,\n\tcreated_at  BIGINT NOT NULL,\n\tPRIMARY KEY (tenant, task_id, idem_key))`,
      `CREATE INDEX IF NOT EXISTS ${i}_created ON ${i} (created_at)`,
    ];
    this.q = {
      update: `UPDATE ${t} SET lease_epoch = $1, updated_at = $2 WHERE tenant = $3 AND task_id = $4 AND lease_epoch <= $5`,
      insert: `INSERT INTO ${t} (tenant, task_id, lease_epoch, updated_at) VALUES ($1, $2, $3, $4) ON CONFLICT (tenant, task_id) DO NOTHING`,
      epoch: `SELECT lease_epoch FROM ${t} WHERE tenant = $1 AND task_id = $2`,
      idemGet: `SELECT fingerprint, status, header, body FROM ${i} WHERE tenant = $1 AND task_id = $2 AND idem_key = $3`,
      idemPut: `INSERT INTO ${i} (tenant, task_id, idem_key, fingerprint, lease_epoch, status, header, body, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
      purge: `DELETE FROM ${i} WHERE created_at < $1`,
    };
  }

  /** Create the tables if they do not exist. */
  async migrate(c: PgClient): Promise<void> {
    for (const s of this.schema) await c.query(s);
  }

  private async fence(c: PgClient, w: Write): Promise<void> {
    const e = encodeEpoch(w.epoch), now = this.now();
    for (let i = 0; i < MAX_ATTEMPTS; i++) {
      if ((await c.query(this.q.update, [e, now, w.tenant, w.task, e])).rowCount === 1) return;
      if ((await c.query(this.q.insert, [w.tenant, w.task, e, now])).rowCount === 1) return;
      const r = await c.query(this.q.epoch, [w.tenant, w.task]);
      if (r.rows.length === 0) continue;
      const seen = BigInt(r.rows[0].lease_epoch);
      if (w.epoch < seen) throw stale(w.epoch, seen);
      // committed by someone else between our UPDATE and INSERT: UPDATE again
    }
    throw new FenceError("store-failure", `fence: store failure: task ${JSON.stringify(w.task)} did not settle after ${MAX_ATTEMPTS} attempts`);
  }

  /**
   * In the caller's transaction: stale-token if the epoch is below the floor,
   * else raise it (the row stays locked until commit); then the recorded
   * response to replay, payload-mismatch, or undefined (perform the write).
   */
  async check(c: PgClient, w: Write): Promise<FenceResponse | undefined> {
    let rows: any[];
    try {
      await this.fence(c, w);
      if (!w.idempotencyKey) return undefined;
      rows = (await c.query(this.q.idemGet, [w.tenant, w.task, w.idempotencyKey])).rows;
    } catch (e) {
      throw e instanceof FenceError ? e : storeFailure("fence", e);
    }
    if (rows.length === 0) return undefined;
    const r = rows[0];
    if (r.fingerprint !== w.fingerprint.toString("hex")) {
      throw new FenceError("idempotency-payload-mismatch", `fence: idempotency key reused with a different payload: key ${JSON.stringify(w.idempotencyKey)}`);
    }
    const headers: [string, string][] = [];
    for (const [k, vs] of Object.entries(JSON.parse(r.header) as Record<string, string[]>)) for (const v of vs) headers.push([k, v]);
    return { status: r.status, headers, body: Buffer.from(r.body ?? []) };
  }

  /** Record resp under the key in the caller's transaction (no-op without a key or for a 5xx). */
  async record(c: PgClient, w: Write, resp: FenceResponse): Promise<void> {
    if (!w.idempotencyKey || !recordable(resp)) return;
    const r = replayable(resp);
    const header: Record<string, string[]> = {};
    for (const [k, v] of r.headers) (header[k] ??= []).push(v);
    try {
      await c.query(this.q.idemPut, [w.tenant, w.task, w.idempotencyKey, w.fingerprint.toString("hex"), encodeEpoch(w.epoch),
        r.status, JSON.stringify(header), r.body, this.now()]);
    } catch (e) {
      throw storeFailure(`record key ${JSON.stringify(w.idempotencyKey)}`, e);
    }
  }

  async maxSeen(c: PgClient, task: string, tenant = ""): Promise<bigint | undefined> {
    const r = await c.query(this.q.epoch, [tenant, task]);
    return r.rows.length ? BigInt(r.rows[0].lease_epoch) : undefined;
  }

  /** Delete records created before cutoff (ms since the epoch); task rows are never purged. */
  async purgeIdempotency(c: PgClient, cutoffMs: number): Promise<number> {
    return (await c.query(this.q.purge, [cutoffMs])).rowCount ?? 0;
  }

  async do(w: Write, fn: WriteFn): Promise<{ response: FenceResponse; outcome: Outcome }> {
    if (!this.pool) throw new Error("fence: PgStore needs a pool for do()");
    let c: PgClient;
    try {
      c = await this.pool.connect();
      await c.query("BEGIN");
    } catch (e) {
      throw storeFailure("begin", e);
    }
    let done = false;
    try {
      const replay = await this.check(c, w);
      if (replay) {
        await c.query("COMMIT"); // the replay's raise of max_seen
        done = true;
        return { response: replay, outcome: "replayed" };
      }
      let resp: FenceResponse;
      try {
        resp = await fn(c);
      } catch (e) {
        throw writeFailed(e);
      }
      if (recordable(resp)) {
        await this.record(c, w, resp);
        try {
          await c.query("COMMIT");
        } catch (e) {
          throw storeFailure("commit", e);
        }
        done = true;
      }
      return { response: resp, outcome: "executed" };
    } finally {
      if (!done) await c.query("ROLLBACK").catch(() => undefined);
      c.release?.();
    }
  }
}
