// Racing epochs (the vectors' "races"): every epoch sent at once for one
// task, against the memory store and a real PostgreSQL. Afterwards
// max_seen is the highest epoch, the accepted epochs never decreased in
// the order the writes took effect, the highest was accepted, and every
// rejection named a floor above its epoch.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { FenceError, MemStore, PgStore, Store } from "../src/index.js";
import { V } from "./harness.js";
import { usePostgresPool } from "./pg.js";

async function race(store: Store, task: string, epochs: bigint[]): Promise<bigint> {
  const applied: bigint[] = [];
  const errors: string[] = [];
  await Promise.all(epochs.map(async (e) => {
    try {
      await store.do({ tenant: "", task, epoch: e, epochString: e.toString(), holder: "", idempotencyKey: "", fingerprint: Buffer.alloc(0) }, async () => {
        applied.push(e);
        await new Promise((r) => setImmediate(r)); // let the others pile up on the task
        return { status: 201, headers: [], body: Buffer.alloc(0) };
      });
    } catch (x) {
      const fe = x as FenceError;
      if (!(fe.reason === "stale-token" && fe.maxSeen! > e)) errors.push(`epoch ${e}: ${fe.message}`);
    }
  }));
  const top = epochs.reduce((a, x) => (x > a ? x : a));
  assert.deepEqual(errors, [], `applied ${applied}`);
  assert.deepEqual(applied, [...applied].sort((a, x) => (a < x ? -1 : a > x ? 1 : 0)), `accepted epochs decreased: ${applied}`);
  assert.ok(applied.includes(top), `highest epoch not applied: ${applied}`);
  return top;
}

describe("races, memory store", () => {
  for (const r of V.races) {
    test(r.name, async () => {
      for (let i = 0; i < r.rounds; i++) {
        const s = new MemStore();
        const top = await race(s, `race-${i}`, r.epochs.map(BigInt));
        assert.equal(s.maxSeen(`race-${i}`), top);
      }
    });
  }
});

describe("races, PostgreSQL store", () => {
  const db = usePostgresPool();
  for (const r of V.races) {
    test(r.name, async (t) => {
      const got = db();
      if ("skip" in got) return t.skip(got.skip);
      const pool = got.pool;
      const store = new PgStore(pool, "race_");
      const c = await pool.connect();
      try {
        await store.migrate(c);
        for (let i = 0; i < r.rounds; i++) {
          const task = `${r.name}-${i}`;
          const top = await race(store, task, r.epochs.map(BigInt));
          assert.equal(await store.maxSeen(c, task), top);
        }
      } finally {
        c.release();
      }
    });
  }
});
