/**
 * The bucket's RPC contract and the fire message are defined in src/protocol/ (bucket.ts, fire.ts),
 * outside any one of the parties that speak them, as zod schemas whose types are derived from them.
 * Re-exported here for the modules that import them from the bucket.
 */
export * from "../protocol/bucket";
export type { FireGroup, FireMessage, FireRef } from "../protocol/fire";
