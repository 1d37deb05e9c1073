// Calls of the sidecar's control API over node:http with the SDK's own
// agent, so HTTP_PROXY / NODE_USE_ENV_PROXY never route a control call
// through the proxy: the SDK adds no request to a tool call's path.

import http from "node:http";
import { ControlError, type ProblemBody } from "./errors.js";
import { kinds } from "./errors_gen.js";

/** The sidecar's control API when FENCEPOST_CONTROL_URL is not set. */
export const DEFAULT_CONTROL_URL = "http://127.0.0.1:7481";

/** How long one control call may take. */
const CALL_TIMEOUT_MS = 30_000;

/** The typed error of a refusal. */
export function problemError(status: number, body: string): ControlError {
  let p: ProblemBody;
  try {
    p = JSON.parse(body) as ProblemBody;
    if (typeof p.code !== "string") throw new Error("no code");
  } catch {
    p = { code: "unknown", detail: body.slice(0, 200).trim() };
  }
  p.status = status;
  const K = kinds[p.code];
  return K ? new K(p) : new ControlError(p, status >= 500);
}

/** The sidecar's view of one held lease (GET /v1/lease). */
export interface LeaseView {
  taskId: string;
  epoch: number;
  status: string;
  current: boolean;
  checkpointSeq?: number;
  checkpointStep?: string;
}

/** The reply to acquire and claim. */
export interface Grant {
  lease: LeaseView;
  task: { taskId: string; signal?: string };
  checkpointData?: unknown;
}

/** A client of one sidecar's control API. */
export class Client {
  readonly url: URL;
  readonly agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

  constructor(baseURL: string = process.env.FENCEPOST_CONTROL_URL || DEFAULT_CONTROL_URL) {
    this.url = new URL(baseURL);
    if (this.url.protocol !== "http:") throw new TypeError(`FENCEPOST_CONTROL_URL: must be http://host:port, got ${baseURL}`);
  }

  /** POST body (GET when undefined) to path; the decoded reply or a typed ControlError. */
  call<T = unknown>(path: string, body?: Record<string, unknown>): Promise<T> {
    return new Promise((resolve, reject) => {
      const data = body === undefined ? undefined : JSON.stringify(body);
      const req = http.request(
        new URL(path, this.url),
        {
          method: data === undefined ? "GET" : "POST",
          agent: this.agent,
          headers: data === undefined ? {} : { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(data) },
          timeout: CALL_TIMEOUT_MS,
        },
        (res) => {
          let text = "";
          res.setEncoding("utf8");
          res.on("data", (c: string) => (text += c));
          res.on("end", () => {
            const st = res.statusCode ?? 0;
            if (st < 200 || st >= 300) return reject(problemError(st, text));
            resolve((text.trim() ? JSON.parse(text) : undefined) as T);
          });
          res.on("error", reject);
        },
      );
      req.on("timeout", () => req.destroy(new Error(`fencepost: ${path}: no answer in ${CALL_TIMEOUT_MS} ms`)));
      req.on("error", reject);
      req.end(data);
    });
  }

  acquire(taskId: string, create = false): Promise<Grant> {
    return this.call<Grant>("/v1/acquire", { taskId, create });
  }

  claim(): Promise<Grant> {
    return this.call<Grant>("/v1/claim", {});
  }

  async leases(taskId = ""): Promise<LeaseView[]> {
    const q = taskId ? `?taskId=${encodeURIComponent(taskId)}` : "";
    return (await this.call<{ leases: LeaseView[] }>("/v1/lease" + q)).leases;
  }

  /** Close idle connections (the process may then exit). */
  close(): void {
    this.agent.destroy();
  }
}
