// A PostgreSQL to test against, found like the Go and Python tests do
// (fence/sqlstore/pg_test.go): FENCEPOST_TEST_POSTGRES_DSN; else, as root,
// a throwaway server from /usr/lib/postgresql started as the postgres OS
// user in a temporary directory and stopped (by PID) at the end; else a
// reason to skip.

import { spawn, spawnSync, ChildProcess } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, openSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { after, before } from "node:test";

export type PG = { dsn: string; stop: () => Promise<void> } | { skip: string };

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => resolve(p));
    });
  });
}

export async function startPostgres(): Promise<PG> {
  if (process.env.FENCEPOST_TEST_POSTGRES_DSN) return { dsn: process.env.FENCEPOST_TEST_POSTGRES_DSN, stop: async () => {} };
  if (process.getuid?.() !== 0) return { skip: "PostgreSQL tests skipped: FENCEPOST_TEST_POSTGRES_DSN is unset and not running as root to start a throwaway server" };
  const vers = existsSync("/usr/lib/postgresql") ? readdirSync("/usr/lib/postgresql").filter((v) => existsSync(`/usr/lib/postgresql/${v}/bin/initdb`)).sort() : [];
  if (!vers.length) return { skip: "PostgreSQL tests skipped: no /usr/lib/postgresql/*/bin/initdb (apt-get install postgresql)" };
  const bin = `/usr/lib/postgresql/${vers[vers.length - 1]}/bin`;
  const id = spawnSync("id", ["-u", "postgres"]), gid = spawnSync("id", ["-g", "postgres"]);
  if (id.status !== 0) return { skip: "PostgreSQL tests skipped: no postgres OS user" };
  const uid = Number(id.stdout.toString()), g = Number(gid.stdout.toString());
  const dir = mkdtempSync("/tmp/fencepost-nodetest-pg-");
  chmodSync(dir, 0o711);
  const data = join(dir, "data");
  mkdirSync(data, { mode: 0o700 });
  chownSync(data, uid, g);
  const init = spawnSync(`${bin}/initdb`, ["-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"], { uid, gid: g, cwd: dir });
  if (init.status !== 0) throw new Error(`initdb: ${init.stdout} ${init.stderr}`);
  const port = await freePort();
  const log = openSync(join(dir, "postgres.log"), "w");
  const srv: ChildProcess = spawn(`${bin}/postgres`, ["-D", data, "-p", String(port), "-h", "127.0.0.1", "-k", data, "-F",
    "-c", "max_connections=60", "-c", "shared_buffers=16MB"], { uid, gid: g, cwd: dir, stdio: ["ignore", log, log] });
  const dsn = `postgresql://postgres@127.0.0.1:${port}/postgres`;
  const pg = (await import("pg")).default;
  const deadline = Date.now() + 30_000;
  for (;;) {
    const c = new pg.Client({ connectionString: dsn });
    try {
      await c.connect();
      await c.end();
      break;
    } catch (e) {
      await c.end().catch(() => undefined);
      if (Date.now() > deadline || srv.exitCode !== null) {
        srv.kill("SIGKILL");
        throw new Error(`postgres did not come up: ${e}\n${readFileSync(join(dir, "postgres.log"))}`);
      }
      await new Promise((r) => setTimeout(r, 50)); // poll interval, bounded by the deadline
    }
  }
  return {
    dsn,
    stop: async () => {
      const exited = new Promise((r) => srv.once("exit", r));
      srv.kill("SIGINT"); // fast shutdown; only our own PID
      const t = setTimeout(() => srv.kill("SIGKILL"), 15_000);
      await exited;
      clearTimeout(t);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Registers before/after hooks in the current describe that start a
 * PostgreSQL (startPostgres) and a pool on it; the returned function gives
 * the pool, or the reason to skip.
 */
export function usePostgresPool(): () => { pool: import("pg").Pool } | { skip: string } {
  let db: PG | undefined;
  let pool: import("pg").Pool | undefined;
  before(async () => {
    db = await startPostgres();
    if ("dsn" in db) {
      const pg = (await import("pg")).default;
      pool = new pg.Pool({ connectionString: db.dsn, max: 20 });
      pool.on("error", () => undefined); // idle clients see the server stop at the end
    }
  });
  after(async () => {
    await pool?.end();
    if (db && "stop" in db) await db.stop();
  });
  return () => (pool ? { pool } : { skip: (db as { skip: string } | undefined)?.skip ?? "PostgreSQL not started" });
}
