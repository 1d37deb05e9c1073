import assert from "node:assert/strict";
import { afterEach, beforeEach, test } from "node:test";
import { Client, LeaseLostError, NoTaskError, StaleEpochError, NoSessionError, TaskNotFoundError, type LeaseEvent, withCurrentTask, withNextTask, withTask } from "../src/index.js";
import { eventually, Fake } from "./fake.js";

let fake: Fake;
let client: Client;
beforeEach(async () => {
  fake = await Fake.start();
  client = new Client(fake.url);
});
afterEach(() => {
  client.close();
  fake.stop();
});

const aborted = (s: AbortSignal) => new Promise<void>((r) => (s.aborted ? r() : s.addEventListener("abort", () => r())));

test("the block holds attach and completes on return", async () => {
  await withTask("t1", async (lease) => {
    assert.equal(lease.epoch, 1);
    assert.equal(lease.resumedFrom, undefined);
    assert.equal((await fake.task("t1")).attached, 1, "the block keeps /v1/attach?task=t1 open");
    await lease.checkpoint("page-1", { page: 1 });
    await lease.progress();
  }, { client, create: true });
  const t = await fake.task("t1");
  assert.equal(t.state, "completed");
  assert.deepEqual(JSON.parse(t.data), { page: 1 });
  assert.equal(t.progress, 2);
  await eventually(async () => (await fake.task("t1")).attached === 0, "attach to close after complete");
});

for (const [op, kind] of [["revoke", "revoked"], ["lose", "lost"]]) {
  test(`a ${kind} event aborts lease.signal at once and the next call throws`, async () => {
    const events: LeaseEvent[] = [];
    let late: unknown;
    await assert.rejects(
      withTask("t1", async (lease) => {
        await fake.admin(op, "t1");
        await aborted(lease.signal);
        assert.ok(lease.signal.reason instanceof LeaseLostError);
        late = await lease.checkpoint("late", 1).catch((e) => e);
        lease.signal.throwIfAborted();
      }, { client, create: true, onEvent: (e) => events.push(e) }),
      LeaseLostError,
    );
    assert.ok(late instanceof LeaseLostError);
    assert.equal((await fake.task("t1")).state, "pending", "a lost lease is neither failed nor completed");
    assert.equal(events[0].kind, "state");
    assert.equal(events.at(-1)!.kind, kind);
    assert.equal(events.at(-1)!.stop, true);
  });
}

test("a throwing block fails or gives back, never completes", async () => {
  await assert.rejects(withTask("t1", async () => { throw new Error("boom"); }, { client, create: true }), /boom/);
  assert.equal((await fake.task("t1")).state, "failed");
  assert.equal((await fake.task("t1")).reason, "boom");
  await assert.rejects(withTask("t2", async () => { throw new Error("boom"); }, { client, create: true, onError: "giveBack" }), /boom/);
  assert.equal((await fake.task("t2")).state, "pending");
});

test("a claim resumes from the checkpoint under a higher epoch", async () => {
  let first = 0;
  await assert.rejects(withTask("t1", async (lease) => {
    first = lease.epoch;
    await lease.checkpoint("page-3", { page: 3 });
    await fake.admin("revoke", "t1");
    await aborted(lease.signal);
  }, { client, create: true }), LeaseLostError);
  await withNextTask(async (lease) => {
    assert.equal(lease.taskId, "t1");
    assert.ok(lease.epoch > first);
    assert.deepEqual(lease.resumedFrom, { page: 3 });
    await lease.complete({ ok: true });
  }, { client });
  assert.deepEqual(JSON.parse((await fake.task("t1")).result), { ok: true });
  await assert.rejects(withNextTask(async () => undefined, { client }), (e) => e instanceof NoTaskError && e.status === 404 && !e.retryable);
});

test("waitExternal resumes on a signal", async () => {
  await withTask("t1", async (lease) => {
    const e1 = lease.epoch;
    void eventually(async () => (await fake.task("t1")).state === "waiting", "the task to wait").then(() =>
      fake.admin("signal", "t1", {}, '{"approved":true}'));
    assert.deepEqual(await lease.waitExternal(60_000), { approved: true });
    assert.ok(lease.epoch > e1);
    assert.equal((await fake.task("t1")).attached, 1);
  }, { client, create: true });
  assert.equal((await fake.task("t1")).state, "completed");
});

test("a stop during the worker's own end is not a loss", async () => {
  await fake.admin("waitlost");
  await withTask("t1", async (lease) => {
    await fake.admin("signal", "t1", {}, '"ok"');
    assert.equal(await lease.waitExternal(60_000), "ok");
    await lease.checkpoint("after", 1);
  }, { client, create: true });
  assert.equal((await fake.task("t1")).state, "completed");
});

test("a reconnect replays the events missed meanwhile", async () => {
  await assert.rejects(withTask("t1", async (lease) => {
    await fake.admin("drop", "", { pause: "1" });
    await fake.admin("revoke", "t1");
    await fake.admin("resume");
    await aborted(lease.signal);
  }, { client, create: true }), LeaseLostError);
  const s = await fake.admin("streams");
  assert.ok(s.replayed >= 1);
  assert.ok(s.lastEventIds.at(-1));
});

test("a sidecar restart: kept lease goes on, dropped lease stops", async () => {
  await withTask("t1", async (lease) => {
    const n = (await fake.admin("streams")).lastEventIds.length;
    await fake.admin("restart", "", { keep: "1" });
    await eventually(async () => (await fake.admin("streams")).lastEventIds.length > n, "a reconnect");
    await lease.checkpoint("after", 1);
    assert.equal(lease.lost, false);
  }, { client, create: true });
  await assert.rejects(withTask("t2", async (lease) => {
    await fake.admin("restart", "", { keep: "0" });
    await aborted(lease.signal);
  }, { client, create: true }), LeaseLostError);
});

test("problems are typed from the shared table", async () => {
  await assert.rejects(withTask("nope", async () => undefined, { client }), (e) => e instanceof TaskNotFoundError && e.code === "task_not_found" && e.status === 404);
  assert.ok(new StaleEpochError({ code: "stale_epoch" }) instanceof LeaseLostError);
  assert.equal(NoSessionError.retryable, true);
});

test("one-task mode takes the sidecar's lease", async () => {
  const { epoch } = await fake.admin("hold", "job-7");
  process.env.FENCEPOST_TASK = "job-7";
  process.env.FENCEPOST_CHECKPOINT = '{"step":2}';
  try {
    await withCurrentTask(async (lease) => {
      assert.equal(lease.epoch, epoch);
      assert.deepEqual(lease.resumedFrom, { step: 2 });
    }, { client });
  } finally {
    delete process.env.FENCEPOST_TASK;
    delete process.env.FENCEPOST_CHECKPOINT;
  }
  assert.equal((await fake.task("job-7")).state, "completed");
});
