import type { Bucket } from "./bucket/bucket";

/** Bindings and vars (wrangler.toml); parsed once by config.ts. */
export interface Env {
  DB: D1Database;
  BUCKET: DurableObjectNamespace<Bucket>;
  /** fire queues FIRE_QUEUE_0..N-1, chosen by bucket */
  [fireQueue: `FIRE_QUEUE_${number}`]: Queue<FireMessage>;
  API_KEYS?: string;
  WEBHOOK_SECRET?: string;
  WEBHOOK_SECRETS?: string;
  /** per-key API rate limit (the platform's rate limiting binding) */
  API_RATE_LIMITER?: RateLimit;
  ALLOW_LOOPBACK_TARGETS?: string;
  BUCKETS?: string;
  LOOKAHEAD_MS?: string;
  LEASE_MS?: string;
  DISPATCH_TIMEOUT_MS?: string;
  DELIVERY_CONCURRENCY?: string;
  ALARM_QUANTUM_MS?: string;
  FLUSH_DELAY_MS?: string;
  FIRE_BATCH_LIMIT?: string;
  HISTORY_RETENTION_MS?: string;
  IDEMPOTENCY_WINDOW_MS?: string;
}

/** What the bucket sends to a fire queue: ids only; the claim returns the target. */
export interface FireMessage {
  v: 1;
  executionId: string;
  bucket: number;
  tenant: string;
  dueAt: number;
}

declare global {
  namespace Cloudflare {
    // types `exports` from "cloudflare:workers" (used by the integration tests)
    interface GlobalProps {
      mainModule: typeof import("./index");
      durableNamespaces: "Bucket";
    }
  }
}
