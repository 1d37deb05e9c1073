// An example worker written with the TypeScript SDK: an agent-like loop that
// calls a tool per step (fetch with lease.signal, so a lost lease aborts the
// call in flight), checkpoints after each, asks for approval half-way (wait +
// signal) and stops the moment its lease is lost. Under `fencepost run` it
// takes the sidecar's task (FENCEPOST_TASK); otherwise it acquires (creating)
// AGENT_TASK, default agent-demo.
//   cd proxy/worker/js && npx tsc -p . && node dist/examples/agent.js
import { LeaseLostError, withCurrentTask, withTask, type Lease } from "../js/src/index.js";

const STEPS = 6;

async function tool(step: number, signal: AbortSignal): Promise<void> {
  const url = process.env.AGENT_TOOL_URL;
  if (!url) {
    await new Promise((resolve, reject) => {
      const t = setTimeout(resolve, 1000);
      signal.addEventListener("abort", () => (clearTimeout(t), reject(signal.reason)));
    });
    return;
  }
  const r = await fetch(url, { method: "POST", body: `step ${step}`, signal });
  if (!r.ok) throw new Error(`tool call: ${r.status}`);
}

async function agent(lease: Lease): Promise<void> {
  const start = (lease.resumedFrom as { step?: number } | undefined)?.step ?? 0;
  console.log(`task ${lease.taskId} epoch ${lease.epoch}, resuming at step ${start}`);
  for (let step = start; step < STEPS; step++) {
    await tool(step, lease.signal);
    await lease.checkpoint(`step-${step}`, { step: step + 1 });
    if (step === STEPS / 2 && process.env.AGENT_WAIT) {
      console.log(`waiting for approval: fencepost ctl tasks signal ${lease.taskId} --payload '"ok"'`);
      const sig = await lease.waitExternal(600_000);
      console.log(`resumed with ${JSON.stringify(sig)} under epoch ${lease.epoch}`);
    }
  }
}

try {
  if (process.env.FENCEPOST_TASK) await withCurrentTask(agent);
  else await withTask(process.env.AGENT_TASK ?? "agent-demo", agent, { create: true });
  console.log("completed");
} catch (e) {
  if (!(e instanceof LeaseLostError)) throw e;
  console.log(`stopped: the lease was lost: ${e.message}`);
  process.exit(3);
}
