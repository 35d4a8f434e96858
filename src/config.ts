/**
 * Every setting of the scheduler, with its unit in the name and its default: the one place a
 * default is written. wrangler.toml [vars] and .dev.vars.example set only what differs from it,
 * each with why; `npm run config` (scripts/config.mjs) prints what is in effect where. Parsed
 * once per env.
 */
import { z } from "zod";
import type { FireMessage } from "./bucket/protocol";

const int = (fallback: number, min = 0) => z.coerce.number().int().min(min).default(fallback);

export const ConfigSchema = z.object({
  /** partitions; only ever increase it (rows keep the bucket they were created with) */
  BUCKETS: int(32, 1),
  /** executions due within this window go to their bucket; later ones wait in D1 */
  LOOKAHEAD_MS: int(180_000, 1),
  /** lease length; heartbeats extend it */
  LEASE_MS: int(10_000, 100),
  /** a dispatch overtaken by later ones and unclaimed this long after its send was lost: it is sent again */
  DISPATCH_TIMEOUT_MS: int(10_000, 100),
  /** an alarm fires at most once per quantum and sends everything due */
  ALARM_QUANTUM_MS: int(50, 1),
  /**
   * targets called at once per consumer invocation: production allows 6 open connections per
   * invocation, and more would queue while their timeout runs. The fire consumers' max_batch_size
   * (wrangler.toml) is at most this, so no delivery waits behind a slow one of its own batch.
   */
  DELIVERY_CONCURRENCY: int(6, 1),
  /** finished outcomes are written to D1 at most this often, in one batch per bucket */
  FLUSH_DELAY_MS: int(1_000, 0),
  /** executions sent per alarm pass before re-arming (keeps one alarm short) */
  FIRE_BATCH_LIMIT: int(2_000, 100),
  /** D1 keeps terminal execution history this long */
  HISTORY_RETENTION_MS: int(30 * 86_400_000, 0),
  /** create idempotency keys are remembered this long (a repeat within it answers the original) */
  IDEMPOTENCY_WINDOW_MS: int(86_400_000, 0),
  /** http:// and loopback/private targets; local development only */
  ALLOW_LOOPBACK_TARGETS: z
    .enum(["true", "false"])
    .default("false")
    .transform((v) => v === "true"),
  /** signing secret of every tenant not in WEBHOOK_SECRETS */
  WEBHOOK_SECRET: z.string().default(""),
  /** per-tenant secrets with rotation: "tenant:whsec_current whsec_next,tenant2:whsec_x" */
  WEBHOOK_SECRETS: z.string().default(""),
  /** "tenant:key,tenant:key" */
  API_KEYS: z.string().default(""),
});

/** Settings that are secrets (`wrangler secret put`): printed only as set or unset. */
export const SECRET_SETTINGS = ["API_KEYS", "WEBHOOK_SECRET", "WEBHOOK_SECRETS"] as const;

export type Config = z.infer<typeof ConfigSchema> & { fireQueues: Queue<FireMessage>[] };

const cache = new WeakMap<object, Config>();

export function configOf(env: Env): Config {
  const cached = cache.get(env);
  if (cached) return cached;
  const parsed = ConfigSchema.parse(env);
  const fireQueues: Queue<FireMessage>[] = [];
  for (let i = 0; env[`FIRE_QUEUE_${i}`] !== undefined; i++) fireQueues.push(env[`FIRE_QUEUE_${i}`]!);
  const config = { ...parsed, fireQueues };
  cache.set(env, config);
  return config;
}
