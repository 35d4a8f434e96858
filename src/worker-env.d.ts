/**
 * The Worker's bindings and vars (wrangler.toml; parsed once by config.ts), declared globally as
 * `wrangler types` declares them, so that no module imports them: the Bucket class and the Env that
 * names it would otherwise import each other.
 */

import type { BulkAction } from "./actions/bulk-action";
import type { Alerts } from "./alerts/alerts";
import type { Bucket } from "./bucket/bucket";
import type { FireGroup } from "./bucket/protocol";
import type { DebounceKeys } from "./debounce/debounce-keys";
import type { FlowKey } from "./flow/flow-key";
import type { IdempotencyKeys } from "./idempotency/idempotency-keys";
import type { PullQueue } from "./pull/pull-queue";

declare global {
  namespace Cloudflare {
    interface Env {
      /** the system of record's shard 0 (db/shards.ts) */
      DB: D1Database;
      /** shards 1..S-1 of the system of record, when there are more than one */
      [shard: `DB_${number}`]: D1Database;
      /** the history archive (archive/archive.ts); optional: without it history is only purged */
      ARCHIVE?: R2Bucket;
      /** a tenant's idempotency keys, named "<tenant>\n<slot>" (idempotency/idempotency-keys.ts) */
      IDEMPOTENCY_KEYS: DurableObjectNamespace<IdempotencyKeys>;
      /** a tenant's debounce keys, named "<tenant>\n<slot>" (debounce/debounce-keys.ts) */
      DEBOUNCE_KEYS: DurableObjectNamespace<DebounceKeys>;
      BUCKET: DurableObjectNamespace<Bucket>;
      /** one flow-control key of one tenant, named "<tenant>\n<key>" */
      FLOW_KEY: DurableObjectNamespace<FlowKey>;
      /** one bulk action of one tenant, named "<tenant>\n<action id>" */
      BULK_ACTION: DurableObjectNamespace<BulkAction>;
      /** one pull queue of one tenant, named "<tenant>\n<queue>" */
      PULL_QUEUE: DurableObjectNamespace<PullQueue>;
      /** a tenant's alert target and the deaths waiting for its next digest, named "<tenant>" (alerts/alerts.ts) */
      ALERTS: DurableObjectNamespace<Alerts>;
      /** fire queues FIRE_QUEUE_0..N-1, chosen by bucket */
      [fireQueue: `FIRE_QUEUE_${number}`]: Queue<FireGroup>;
      API_KEYS?: string;
      /** where Durable Objects and D1 shards are created (config.ts) */
      LOCATION_HINT?: string;
      /** the local profile only (platform/profile.ts): "enforce" (default) or "meter" */
      PLATFORM_LIMITS?: string;
      /** the local profile only: how long waitUntil work lives after its handler returns (production's 30 s; tests scale it) */
      PLATFORM_WAIT_UNTIL_MS?: string;
      /** JSON (or a [vars] table): handler Workers by name, core/handler-workers.ts */
      HANDLER_WORKERS?: string | Record<string, unknown>;
      WEBHOOK_SECRET?: string;
      WEBHOOK_SECRETS?: string;
      /** per-key API rate limit (the platform's rate limiting binding) */
      API_RATE_LIMITER?: RateLimit;
      ALLOW_LOOPBACK_TARGETS?: string;
      BUCKETS?: string;
      LOOKAHEAD_MS?: string;
      LEASE_MS?: string;
      DISPATCH_TIMEOUT_MS?: string;
      DISPATCH_QUEUE_TARGET_MS?: string;
      DELIVERY_CONCURRENCY?: string;
      ORIGIN_PARALLELISM?: string;
      FLOW_WAIT_MAX_MS?: string;
      ALARM_QUANTUM_MS?: string;
      FLUSH_DELAY_MS?: string;
      FIRE_BATCH_LIMIT?: string;
      HISTORY_RETENTION_MS?: string;
      IDEMPOTENCY_WINDOW_MS?: string;
      /** local only: "median_ms,p99_ms", production's queue delay emulated (platform/queue-latency.ts) */
      QUEUE_LATENCY?: string;
    }

    // types `exports` from "cloudflare:workers" (used by the integration tests)
    interface GlobalProps {
      mainModule: typeof import("./index");
      durableNamespaces: "Bucket" | "FlowKey" | "BulkAction" | "PullQueue" | "IdempotencyKeys" | "DebounceKeys" | "Alerts";
    }
  }

  /** The Worker's bindings and vars. */
  interface Env extends Cloudflare.Env {}
}
