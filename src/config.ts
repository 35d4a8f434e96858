/**
 * Every setting of the scheduler, with its unit in the name and its default: the one place a
 * default is written. wrangler.toml [vars] and .dev.vars.example set only what differs from it,
 * each with why; `npm run config` (scripts/config.mjs) prints what is in effect where. Parsed
 * once per env.
 */
import { z } from "zod";
import type { HandlerWorkers } from "./core/handler-workers";
import type { QueueDelay } from "./core/queue-delay";
import type { FireGroup } from "./protocol/fire";

/** A handler Worker's name, as jobs name it in target.worker (core/handler-workers.ts). */
export const WorkerName = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[a-z0-9][a-z0-9_-]*$/, "must be lower case letters, digits, - and _");

const HandlerWorkersSchema = z.record(
  WorkerName,
  z.strictObject({
    /** the service binding's name in the scheduler's env (wrangler.toml [[services]]) */
    binding: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be a binding name"),
    /** the tenants granted it; "*" grants every tenant */
    tenants: z.array(z.string().min(1)).min(1),
  }),
) satisfies z.ZodType<HandlerWorkers>;

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
  /**
   * executions per fire message: what one alarm pass sends of a bucket goes in groups of this
   * many, each claimed with one RPC and reported with one (docs/guarantees.md, "Delivery groups"). Production:
   * no larger than DELIVERY_CONCURRENCY with a consumer batch of one message, so a group's HTTP
   * deliveries all start at once (docs/capacity.md §3)
   */
  FIRE_GROUP_SIZE: z.coerce.number().int().min(1).max(100).default(6),
  /**
   * executions per fire message for pull targets: an offer opens no connection (the consumer
   * hands a message's offers to their pull queues, one RPC per queue), so its groups may be
   * larger. Handler Workers keep FIRE_GROUP_SIZE: whether a service-binding call counts toward
   * an invocation's 6 connections is not documented
   */
  FIRE_GROUP_SIZE_PULL: z.coerce.number().int().min(1).max(100).default(50),
  /**
   * deliveries in flight at once to one target origin (scheme://host:port) per tenant, for jobs
   * without a flowControl key: they share the implicit key "origin:<origin>", which a 429/503
   * Retry-After also slows (docs/flow-control.md). 1,000 is Cloud Tasks' default
   * max_concurrent_dispatches per queue: never the bottleneck of a healthy origin (10,000/s at
   * 100 ms a response) yet a cap on the ~6,000 the fire consumers could open at once. 0: off.
   */
  ORIGIN_PARALLELISM: int(1_000, 0),
  /**
   * the longest one answer of a flow-control key holds an execution back: a target's 429/503
   * Retry-After slows the whole key at most this long (one answer must not park a key for the
   * year it may say; after this long a few deliveries probe again), and a waiter whose rate slot
   * is farther away asks again after it, keeping its slot. The default equals retry.maxDelayMs's
   * default: the key holds the others no longer than the execution that got the answer waits.
   */
  FLOW_WAIT_MAX_MS: int(300_000, 1_000),
  /** finished outcomes are written to D1 at most this often, in one batch per bucket */
  FLUSH_DELAY_MS: int(1_000, 0),
  /**
   * the fire queue's own delay each bucket aims at (send to claim, above the lowest seen and the
   * queue's jitter): a backlog waits in its bucket, where other tenants' due jobs take turns with
   * it, not in the first-in-first-out queue (core/dispatch-window.ts). 30 holds under production's
   * jitter now that the jitter is allowed on top (issue 35, item 7: a median of 60 ms and a p99 of
   * 400 ms open the window to hundreds; test/unit/dispatch-window.test.ts); 20 left jitter of
   * independent messages closing it again, and more only lengthens the queue a tenant waits in
   */
  DISPATCH_QUEUE_TARGET_MS: int(30, 1),
  /** executions sent per alarm pass before re-arming (keeps one alarm short); the dispatch window's maximum */
  FIRE_BATCH_LIMIT: int(2_000, 100),
  /** D1 keeps terminal execution history this long */
  HISTORY_RETENTION_MS: int(30 * 86_400_000, 0),
  /**
   * the size watermark of a D1 shard's history: above it the scan purges finished history oldest
   * first, before HISTORY_RETENTION_MS, until the shard is below it (70% of D1's 10 GB); never a
   * live job, a dead letter, nor a dead one-off job (its dead letter's redrive needs it)
   */
  HISTORY_MAX_BYTES: int(7_000_000_000, 0),
  /**
   * the second watermark: a D1 shard above it takes no new jobs (they go to shards with room; with
   * none, a create is a 507 naming the shards); set above HISTORY_MAX_BYTES, so only live jobs, which
   * are never purged, can keep a shard there (90% of D1's 10 GB)
   */
  SHARD_MAX_BYTES: int(9_000_000_000, 0),
  /**
   * where this deployment's Durable Objects are created (placement.ts) and its D1 shards
   * (scripts/deploy.mjs): wnam, enam, weur, eeur, apac or oc; none: near whoever calls first
   */
  LOCATION_HINT: z.enum(["wnam", "enam", "weur", "eeur", "apac", "oc"]).optional(),
  /** create idempotency keys are remembered this long (a repeat within it answers the original) */
  IDEMPOTENCY_WINDOW_MS: int(86_400_000, 0),
  /**
   * local only, off by default: "median_ms,p99_ms" delays every fire message by a log-normal draw
   * with that median and 99th percentile before the local queue has it (platform/queue-latency.ts),
   * as production's queue does (core/queue-delay.ts: Cloudflare gives a median of ~60 ms, no tail);
   * the bench's latency mode (bench/README.md). Never set in production: it would add to the
   * queue's own delay
   */
  QUEUE_LATENCY: z
    .string()
    .default("")
    .transform((value, ctx): QueueDelay | null => {
      if (value.trim() === "") return null;
      const m = /^\s*(\d+)\s*,\s*(\d+)\s*$/.exec(value);
      const [medianMs, p99Ms] = m ? [Number(m[1]), Number(m[2])] : [0, 0];
      if (!m || medianMs < 1 || p99Ms < medianMs || p99Ms > 60_000) {
        ctx.addIssue({ code: "custom", message: 'must be "median_ms,p99_ms" with 1 <= median <= p99 <= 60000, or empty (off)' });
        return z.NEVER;
      }
      return { medianMs, p99Ms };
    }),
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
  /**
   * handler Workers jobs may target over a service binding (core/handler-workers.ts): JSON, or a
   * [vars] table; none by default
   */
  HANDLER_WORKERS: z.preprocess((value, ctx) => {
    if (typeof value !== "string") return value ?? {};
    if (value.trim() === "") return {};
    try {
      return JSON.parse(value);
    } catch {
      ctx.addIssue({ code: "custom", message: "is not JSON", input: value });
      return z.NEVER;
    }
  }, HandlerWorkersSchema),
});

/** Settings that are secrets (`wrangler secret put`): printed only as set or unset. */
export const SECRET_SETTINGS = ["API_KEYS", "WEBHOOK_SECRET", "WEBHOOK_SECRETS"] as const;

export type Config = z.infer<typeof ConfigSchema> & { fireQueues: Queue<FireGroup>[] };

const cache = new WeakMap<object, Config>();

export function configOf(env: Env): Config {
  const cached = cache.get(env);
  if (cached) return cached;
  const parsed = ConfigSchema.parse(env);
  const fireQueues: Queue<FireGroup>[] = [];
  for (let i = 0; env[`FIRE_QUEUE_${i}`] !== undefined; i++) {
    const queue = env[`FIRE_QUEUE_${i}`]!;
    fireQueues.push(parsed.QUEUE_LATENCY ? withLatency(queue, parsed.QUEUE_LATENCY) : queue);
  }
  const config = { ...parsed, fireQueues };
  cache.set(env, config);
  return config;
}

/**
 * The local emulation of production's queue delay (QUEUE_LATENCY), imported once used: Node reads
 * this file for `npm run config` and the bench, and resolves no extensionless import.
 */
function withLatency(queue: Queue<FireGroup>, delay: QueueDelay): Queue<FireGroup> {
  const delayed = import("./platform/queue-latency").then((m) => m.withQueueLatency(queue, delay));
  return {
    metrics: () => queue.metrics(),
    send: async (body, options) => (await delayed).send(body, options),
    sendBatch: async (messages, options) => (await delayed).sendBatch(messages, options),
  };
}
