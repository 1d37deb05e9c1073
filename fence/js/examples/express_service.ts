// A plain Express service that keeps an append-only log of writes per
// task, fenced by five added lines (marked "// fence"). It is the
// downstream of `fencepost demo --downstream node`, with the routes of the
// Go reference service (fence/refsvc): POST /v1/tasks/:task/writes appends
// an entry, GET /v1/log lists them, GET /v1/stats counts rejected writes.
//
//   node fence/js/dist/examples/express_service.js --port 8080

import { createHash } from "node:crypto";
import express from "express";
import { MemStore, captureRawBody, fenceExpress } from "../src/index.js"; // fence (from "@fencepost/fence" outside this repo)

const app = express();
const log: object[] = [];
const stats = { rejected: 0, rejected_stale: 0 };

app.use(express.raw({ type: () => true, verify: captureRawBody })); // fence: keep the bytes for the payload fingerprint
app.use(fenceExpress({ store: new MemStore(), observer: ({ problem }) => { // fence
  stats.rejected += problem ? 1 : 0; // fence: count rejections (the double-execution alarm)
  stats.rejected_stale += problem?.type.endsWith("/stale-token") ? 1 : 0;
} }));

app.post("/v1/tasks/:task/writes", (req, res) => {
  const w = (req as any).fence.write; // fence: the accepted epoch, holder and key
  if (w.task !== req.params.task) return void res.status(403).json({ error: "path and X-Fencing-Task name different tasks" });
  const body: Buffer = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
  const entry = { seq: log.length + 1, task: w.task, epoch: Number(w.epoch), holder: w.holder, idempotency_key: w.idempotencyKey,
    body_sha256: createHash("sha256").update(body).digest("hex"), body_len: body.length, at: new Date().toISOString() };
  log.push(entry);
  res.status(201).json(entry);
});
app.get("/v1/log", (_req, res) => void res.json({ entries: log }));
app.get("/v1/stats", (_req, res) => void res.json(stats));
app.get("/healthz", (_req, res) => void res.json({ status: "ok" }));

const i = process.argv.indexOf("--port");
app.listen(Number(i > 0 ? process.argv[i + 1] : 8080), "127.0.0.1");
