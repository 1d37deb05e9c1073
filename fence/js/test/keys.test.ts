// KeyFetcher: keys fetched from GET /v1/keys, refetched (rate-limited) on
// an unknown key id, plain http refused off loopback. (The TLS path is
// node:https with the given CA; Python's test_keys.py covers a real TLS
// server.)

import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { KeyFetcher, keyID, rawPublicKey } from "../src/index.js";

const doc = (...raws: Buffer[]) => JSON.stringify({ keys: raws.map((r) => ({ id: keyID(r), alg: "Ed25519", public_key: r.toString("base64") })) });

test("refetch on unknown key id, rate-limited", async () => {
  const a = rawPublicKey(generateKeyPairSync("ed25519").publicKey), b = rawPublicKey(generateKeyPairSync("ed25519").publicKey);
  let body = doc(a), hits = 0;
  const srv = http.createServer((req, res) => {
    hits++;
    res.writeHead(req.url === "/v1/keys" ? 200 : 404).end(body);
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  try {
    let now = 0;
    const f = await KeyFetcher.open(`http://127.0.0.1:${(srv.address() as AddressInfo).port}`, { minInterval: 10, now: () => now });
    assert.ok(await f.publicKey(keyID(a)));
    assert.equal(hits, 1);
    body = doc(b, a); // rotation: the new key is published first
    assert.equal(await f.publicKey(keyID(b)), undefined, "refetch is rate-limited");
    assert.equal(hits, 1);
    now = 11;
    assert.ok(await f.publicKey(keyID(b)));
    assert.equal(hits, 2);
  } finally {
    srv.close();
  }
});

test("plain http refused off loopback", async () => {
  await assert.rejects(KeyFetcher.open("http://cluster.example:7000"), /TLS/);
});
