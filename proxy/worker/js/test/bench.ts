// Benchmark: stop event -> lease.signal aborted, against the fake control API.
//   node proxy/worker/js/dist/js/test/bench.js [N]
// Each round holds a fresh task, asks the fake to revoke it and times from just
// before that request to the abort (so the figure includes the admin request's
// round trip: an upper bound). Exits 1 when p99 > 50 ms (the bound).

import { Client, LeaseLostError, withTask } from "../src/index.js";
import { Fake } from "./fake.js";

const n = Number(process.argv[2] ?? 200);
const fake = await Fake.start();
const client = new Client(fake.url);
const lat: number[] = [];
for (let i = 0; i < n; i++) {
  await withTask(`b${i}`, async (lease) => {
    const fired = new Promise<number>((r) => lease.signal.addEventListener("abort", () => r(performance.now())));
    const t0 = performance.now();
    await fake.admin("revoke", `b${i}`);
    lat.push((await fired) - t0);
  }, { client, create: true }).catch((e) => {
    if (!(e instanceof LeaseLostError)) throw e;
  });
}
client.close();
fake.stop();
lat.sort((a, b) => a - b);
const p50 = lat[Math.floor(n / 2)];
const p99 = lat[Math.floor((n * 99) / 100)];
console.log(`typescript stop->AbortSignal: n=${n} p50=${p50.toFixed(2)}ms p99=${p99.toFixed(2)}ms`);
process.exit(p99 <= 50 ? 0 : 1);
