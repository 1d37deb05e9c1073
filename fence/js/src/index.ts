// @fencepost/fence: downstream validation of fencepost fencing tokens
// (fence/SPEC.md), conforming to the Go package's vectors
// (fence/testdata/vectors.json). No runtime dependencies: Node >= 20's
// built-in crypto verifies Ed25519; PgStore takes a `pg` Pool you pass in.
// With the optional peer @opentelemetry/api installed, the verdict of each
// write is recorded on the active span (otel.ts).

export { FenceError, PROBLEM_BASE, PROBLEM_CONTENT_TYPE, TABLE, problemFor, type Problem } from "./problems.js";
export * from "./token.js";
export { KeyFetcher, StaticKeys, keyID, parseKeys, privateKeyFromSeed, publicKeyFromRaw, rawPublicKey, sign, signingMessage, verifySignature, type KeySet } from "./sign.js";
export * from "./validator.js";
export { MemStore, type MemStoreOptions } from "./memstore.js";
export { PgStore, encodeEpoch, type PgClient, type PgPool } from "./pgstore.js";
export { captureRawBody, fenceExpress, type ExpressFenceOptions } from "./express.js";
export { otelAvailable } from "./otel.js";
export { withFence, type WebFenceOptions, type WebHandler } from "./web.js";
