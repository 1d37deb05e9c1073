// Benchmark of one check (parse + Ed25519 verify + memory store), the
// counterpart of Go's BenchmarkValidatorCheckSigned:
//
//   cd fence/js && npm run build && node dist/test/bench.js

import { MemStore, StaticKeys, Validator, privateKeyFromSeed, rawPublicKey, sign } from "../src/index.js";
import { createPublicKey } from "node:crypto";

async function bench(name: string, signed: boolean, n = 20000) {
  const priv = privateKeyFromSeed(Buffer.from(Array.from({ length: 32 }, (_, i) => i)));
  const v = new Validator({ store: new MemStore(), keys: signed ? StaticKeys.of(rawPublicKey(createPublicKey(priv))) : undefined });
  const h: Record<string, string[]> = { "x-fencing-token": ["7"], "x-fencing-task": ["task-1"], "x-fencing-holder": ["w"] };
  if (signed) h["x-fencing-signature"] = [sign(priv, Buffer.from("task-1"), 7n, Buffer.from("w"))];
  const req = { method: "POST", target: "/", getAll: (k: string) => h[k] ?? [], body: async () => Buffer.alloc(0) };
  const resp = { status: 200, headers: [] as [string, string][], body: Buffer.alloc(0) };
  const fn = async () => resp;
  for (let i = 0; i < 1000; i++) await v.check(req, fn);
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    const d = await v.check(req, fn);
    if (d.problem) throw new Error(d.problem.detail);
  }
  const ns = Number(process.hrtime.bigint() - t0) / n;
  console.log(`${name}\t${n}\t${ns.toFixed(0)} ns/check`);
}

await bench("node check (memory store, unsigned)", false);
await bench("node check (memory store, Ed25519 signature)", true);
