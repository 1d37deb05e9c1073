import assert from "node:assert/strict";
import { test } from "node:test";
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { MemorySaver, emptyCheckpoint } from "@langchain/langgraph-checkpoint";
import { Client, LeaseLostError, StaleEpochError, withTask } from "../src/index.js";
import { FencedCheckpointSaver, fencedSaver, MemoryEpochFence } from "../src/langgraph.js";
import { Fake } from "./fake.js";

const cfg = { configurable: { thread_id: "th1", checkpoint_ns: "" } };

test("a stale epoch's put is refused and never reaches the store", async () => {
  const store = new MemorySaver();
  const fence = new MemoryEpochFence();
  const newer = new FencedCheckpointSaver(store, fence, () => 2);
  const stale = new FencedCheckpointSaver(store, fence, () => 1);
  const cp = { ...emptyCheckpoint(), id: "00000000-0000-6000-8000-000000000002" };
  await newer.put(cfg, cp, { source: "loop", step: 1, parents: {} }, {});
  const old = { ...emptyCheckpoint(), id: "00000000-0000-6000-8000-000000000009" };
  await assert.rejects(stale.put(cfg, old, { source: "loop", step: 2, parents: {} }, {}), (e) => e instanceof StaleEpochError && e.epoch === 2);
  await assert.rejects(stale.putWrites({ configurable: { ...cfg.configurable, checkpoint_id: cp.id } }, [["x", 1]], "task"), StaleEpochError);
  await assert.rejects(stale.deleteThread("th1"), StaleEpochError);
  const ids: string[] = [];
  for await (const t of store.list(cfg)) ids.push(t.checkpoint.id);
  assert.deepEqual(ids, [cp.id], "only the newer owner's checkpoint is stored");
  // The newer owner goes on; a yet newer one fences it in turn.
  await newer.put(cfg, { ...emptyCheckpoint(), id: "00000000-0000-6000-8000-000000000003" }, { source: "loop", step: 2, parents: {} }, {});
});

test("a graph checkpointed through the lease stops writing state when the lease is lost", async () => {
  const fake = await Fake.start();
  const client = new Client(fake.url);
  const store = new MemorySaver();
  const State = Annotation.Root({ n: Annotation<number>({ reducer: (a, b) => a + b, default: () => 0 }) });
  try {
    await assert.rejects(withTask("graph-1", async (lease) => {
      const graph = new StateGraph(State).addNode("inc", async () => ({ n: 1 })).addEdge(START, "inc").addEdge("inc", END)
        .compile({ checkpointer: fencedSaver(store, lease) });
      const out = await graph.invoke({ n: 1 }, { configurable: { thread_id: "th" } });
      assert.equal(out.n, 2);
      // The thread's state is read back whole from the stored deltas.
      assert.equal((await graph.invoke({ n: 1 }, { configurable: { thread_id: "th" } })).n, 4);
      assert.ok((await fake.task("graph-1")).progress > 0, "each fenced write is a progress mark");
      await fake.admin("revoke", "graph-1");
      await new Promise<void>((r) => (lease.signal.aborted ? r() : lease.signal.addEventListener("abort", () => r())));
      const before: string[] = [];
      for await (const t of store.list({ configurable: { thread_id: "th" } })) before.push(t.checkpoint.id);
      await assert.rejects(graph.invoke({ n: 1 }, { configurable: { thread_id: "th" } }), LeaseLostError);
      const after: string[] = [];
      for await (const t of store.list({ configurable: { thread_id: "th" } })) after.push(t.checkpoint.id);
      assert.deepEqual(after, before, "nothing was written under the lost lease");
      lease.check();
    }, { client, create: true }), LeaseLostError);
  } finally {
    client.close();
    fake.stop();
  }
});
