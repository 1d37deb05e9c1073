// Ed25519 token signatures (fence/SPEC.md section 3) with Node's built-in
// crypto: the signed message, key ids, the header's strict syntax, key
// documents, and fetching them from the lease cluster's GET /v1/keys over
// TLS with a rate-limited refetch on an unknown key id.

import { createHash, createPrivateKey, createPublicKey, sign as edSign, verify as edVerify, KeyObject } from "node:crypto";
import * as https from "node:https";
import * as http from "node:http";
import { FenceError } from "./problems.js";

export const KEYS_PATH = "/v1/keys";
const SIG_RE = /^ed25519=([0-9a-f]{16}):([A-Za-z0-9_-]{85}[AQgw])$/;
const SPKI_PREFIX = Buffer.from("302a300506032b6570032100", "hex");
const PKCS8_PREFIX = Buffer.from("302e020100300506032b657004220420", "hex");

/** Anything that resolves a key id to a public key. */
export interface KeySet {
  publicKey(id: string): KeyObject | undefined | Promise<KeyObject | undefined>;
}

/** "fencepost-token-v1\n" + task + "\n" + decimal epoch + "\n" + holder, as bytes. */
export function signingMessage(task: Buffer, epoch: bigint, holder: Buffer): Buffer {
  return Buffer.concat([Buffer.from("fencepost-token-v1\n"), task, Buffer.from(`\n${epoch}\n`), holder]);
}

/** First 8 bytes of SHA-256 over the raw 32-byte key, lowercase hex. */
export function keyID(raw: Buffer): string {
  return createHash("sha256").update(raw).digest("hex").slice(0, 16);
}

export function publicKeyFromRaw(raw: Buffer): KeyObject {
  return createPublicKey({ key: Buffer.concat([SPKI_PREFIX, raw]), format: "der", type: "spki" });
}

export function rawPublicKey(k: KeyObject): Buffer {
  return k.export({ format: "der", type: "spki" }).subarray(SPKI_PREFIX.length);
}

export function privateKeyFromSeed(seed: Buffer): KeyObject {
  return createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, seed]), format: "der", type: "pkcs8" });
}

/** The X-Fencing-Signature value for a token (tests and tools). */
export function sign(priv: KeyObject, task: Buffer, epoch: bigint, holder: Buffer): string {
  const sig = edSign(null, signingMessage(task, epoch, holder), priv);
  return `ed25519=${keyID(rawPublicKey(createPublicKey(priv)))}:${sig.toString("base64url")}`;
}

/** A fixed key set, key id -> public key. */
export class StaticKeys implements KeySet {
  constructor(private readonly keys: Map<string, KeyObject> = new Map()) {}
  static of(...raw: Buffer[]): StaticKeys {
    return new StaticKeys(new Map(raw.map((r) => [keyID(r), publicKeyFromRaw(r)])));
  }
  publicKey(id: string) {
    return this.keys.get(id);
  }
  ids(): string[] {
    return [...this.keys.keys()].sort();
  }
}

/** Decode {"keys":[{"id","alg":"Ed25519","public_key"}]}; any bad entry fails the document. */
export function parseKeys(doc: string | Buffer): StaticKeys {
  let entries: unknown;
  try {
    entries = JSON.parse(doc.toString()).keys;
  } catch (e) {
    throw new Error(`fence: key document: ${(e as Error).message}`);
  }
  if (!Array.isArray(entries)) throw new Error("fence: key document: keys is not a list");
  const keys = new Map<string, KeyObject>();
  entries.forEach((e, i) => {
    if (e?.alg !== "Ed25519") throw new Error(`fence: key ${i}: alg must be Ed25519`);
    const s = String(e.public_key ?? "");
    const raw = Buffer.from(s, "base64");
    if (raw.length !== 32 || raw.toString("base64") !== s) throw new Error(`fence: key ${i}: public_key is not 32 bytes of standard base64`);
    if (e.id !== keyID(raw)) throw new Error(`fence: key ${i}: id does not match the key (want ${keyID(raw)})`);
    keys.set(e.id, publicKeyFromRaw(raw));
  });
  return new StaticKeys(keys);
}

/** Throws bad-signature or unknown-key unless header signs (task, epoch, holder). */
export async function verifySignature(keys: KeySet, header: string, task: Buffer, epoch: bigint, holder: Buffer): Promise<void> {
  const m = SIG_RE.exec(header);
  if (!m) throw new FenceError("bad-signature", "fence: bad token signature: want ed25519=<16 lowercase hex>:<86 chars of unpadded base64url>");
  const pub = await keys.publicKey(m[1]);
  if (!pub) throw new FenceError("unknown-key", `fence: unknown signing key: key id ${m[1]}`);
  if (!edVerify(null, signingMessage(task, epoch, holder), pub, Buffer.from(m[2], "base64url"))) {
    throw new FenceError("bad-signature", `fence: bad token signature: does not verify with key ${m[1]}`);
  }
}

export interface KeyFetcherOptions {
  /** PEM of the CA that signed the cluster's certificate (default: system roots). */
  ca?: string | Buffer;
  /** Minimum seconds between refetches on unknown key ids (default 10). */
  minInterval?: number;
  timeoutMs?: number;
  now?: () => number;
}

/**
 * Keys from the lease cluster's GET /v1/keys, over https (plain http only on
 * loopback, for development). Create it with `await KeyFetcher.open(url)`; an
 * unknown key id triggers a refetch at most once per minInterval (the cluster
 * publishes a key before it signs with it).
 */
export class KeyFetcher implements KeySet {
  private keys = new StaticKeys();
  private at = 0;
  private inflight?: Promise<void>;
  private constructor(readonly url: URL, private readonly opts: KeyFetcherOptions) {}

  static async open(clusterURL: string, opts: KeyFetcherOptions = {}): Promise<KeyFetcher> {
    let s = clusterURL.replace(/\/+$/, "");
    if (!s.endsWith(KEYS_PATH)) s += KEYS_PATH;
    const url = new URL(s);
    if (url.protocol !== "https:" && !["127.0.0.1", "[::1]", "localhost"].includes(url.hostname)) {
      throw new Error(`fence: keys URL ${s}: keys must come over TLS (https), or from loopback`);
    }
    const f = new KeyFetcher(url, opts);
    await f.refresh();
    return f;
  }

  private now() {
    return (this.opts.now ?? (() => performance.now() / 1000))();
  }

  private refresh(): Promise<void> {
    this.at = this.now();
    return new Promise((resolve, reject) => {
      const mod = this.url.protocol === "https:" ? https : http;
      const req = mod.get(this.url, { ca: this.opts.ca, timeout: this.opts.timeoutMs ?? 5000 }, (res) => {
        const chunks: Buffer[] = [];
        let n = 0;
        res.on("data", (c: Buffer) => {
          n += c.length;
          if (n > 1 << 20) req.destroy(new Error("fence: key document larger than 1 MiB"));
          else chunks.push(c);
        });
        res.on("end", () => {
          if (res.statusCode !== 200) return reject(new Error(`fence: fetch keys: ${this.url} answered ${res.statusCode}`));
          try {
            this.keys = parseKeys(Buffer.concat(chunks));
            resolve();
          } catch (e) {
            reject(e);
          }
        });
      });
      req.on("timeout", () => req.destroy(new Error("fence: fetch keys: timeout")));
      req.on("error", reject);
    });
  }

  async publicKey(id: string): Promise<KeyObject | undefined> {
    const k = this.keys.publicKey(id);
    if (k) return k;
    if (!this.inflight && this.now() - this.at >= (this.opts.minInterval ?? 10)) {
      this.inflight = this.refresh().catch(() => undefined).finally(() => (this.inflight = undefined));
    }
    if (this.inflight) await this.inflight;
    return this.keys.publicKey(id);
  }
}
