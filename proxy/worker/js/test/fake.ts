// The fake control API (proxy/worker/internal/fakectl, the attach contract
// over an in-memory table), built once with go and started per test.

import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../../../..");
let bin: string | undefined;

export class Fake {
  constructor(readonly url: string, private readonly p: ChildProcess) {}

  static async start(): Promise<Fake> {
    if (!bin) {
      bin = path.join(mkdtempSync(path.join(tmpdir(), "fakectl-")), "fakectl");
      execFileSync("go", ["build", "-o", bin, "./proxy/worker/internal/fakectl/serve"], { cwd: root, stdio: "inherit" });
    }
    const p = spawn(bin, [], { stdio: ["pipe", "pipe", "inherit"] });
    const url = await new Promise<string>((resolve, reject) => {
      let out = "";
      p.stdout!.setEncoding("utf8");
      p.stdout!.on("data", (c: string) => {
        out += c;
        const m = /listening (\S+)\n/.exec(out);
        if (m) resolve(m[1]);
      });
      p.on("exit", () => reject(new Error("fakectl exited: " + out)));
    });
    return new Fake(url, p);
  }

  async admin(op: string, task = "", q: Record<string, string> = {}, body?: string): Promise<any> {
    const qs = new URLSearchParams({ task, ...q });
    const get = op === "task" || op === "streams";
    const r = await fetch(`${this.url}/_fake/${op}?${qs}`, { method: get ? "GET" : "POST", body });
    const t = await r.text();
    return t.trim() ? JSON.parse(t) : undefined;
  }

  task(task: string): Promise<{ state: string; epoch: number; held: boolean; data: string; result: string; reason: string; progress: number; attached: number }> {
    return this.admin("task", task);
  }

  stop(): void {
    this.p.stdin!.end();
  }
}

/** Poll cond until it holds or 10 s pass. */
export async function eventually(cond: () => Promise<boolean> | boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
