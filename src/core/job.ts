/** What a job asks for, normalized at the API edge and copied into its bucket. */
import type { RetryPolicy } from "./backoff";
import type { Schedule } from "./cron";
import type { Debounce } from "./debounce";
import type { TraceContext } from "./trace";

/**
 * A job's target: an HTTP endpoint, a handler Worker called over a service binding, or a pull
 * queue its workers lease from over HTTP.
 */
export type Target = HttpTarget | WorkerTarget | PullTarget;

export interface HttpTarget {
  url: string;
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  headers: Record<string, string>;
  /** the body as sent; JSON bodies are serialized at the edge */
  body: string | null;
}

export interface WorkerTarget {
  /** a name in HANDLER_WORKERS, granted to the job's tenant */
  worker: string;
  /** the payload as JSON text (parsed again for each attempt's RPC), or null */
  payload: string | null;
}

/** A named pull queue of the job's tenant: its executions wait there until a worker leases them. */
export interface PullTarget {
  pull: string;
  /** the payload as JSON text (handed to the worker with each lease), or null */
  payload: string | null;
}

export function isWorkerTarget(target: Target): target is WorkerTarget {
  return "worker" in target;
}

export function isPullTarget(target: Target): target is PullTarget {
  return "pull" in target;
}

export function isHttpTarget(target: Target): target is HttpTarget {
  return "url" in target;
}

export interface JobSpec {
  target: Target;
  timeoutMs: number;
  retry: RetryPolicy;
  metadata: Record<string, unknown> | null;
  /** recurring jobs only */
  schedule: Schedule | null;
  /** the flow-control key it waits on and the limits it asks for (absent in specs stored before it existed) */
  flowControl?: FlowControl | null;
  /** the W3C trace it was created in (absent: none; core/trace.ts) */
  trace?: TraceContext;
  /** a debounced one-off job's key and rule (absent otherwise: a job without it stores nothing more) */
  debounce?: Debounce;
  /** told each execution's success (core/callback.ts); absent or null: none */
  callback?: CallbackTarget | null;
  /** told each execution's death (dead or poisoned after its last attempt); absent or null: none */
  failureCallback?: CallbackTarget | null;
  /** 0-9, higher first among due executions waiting their turn (core/priority.ts); absent: 5 (only other values are stored) */
  priority?: number;
}

/** A callback is delivered like a job's target, to a URL or a handler Worker (a pull queue has no one to push to). */
export type CallbackTarget = HttpTarget | WorkerTarget;

/** A job's flow control: its key (per tenant) and the key's limits, at least one of rate and parallelism. */
export interface FlowControl {
  key: string;
  /** deliveries started per periodSeconds */
  rate: number | null;
  periodSeconds: number;
  /** deliveries in flight at once */
  parallelism: number | null;
}

export type { JobState as JobStatus } from "./lifecycle";

/** The one parser of a stored spec (D1 jobs.spec, the bucket's copies): written by the API only. */
export function parseSpec(json: string): JobSpec {
  return JSON.parse(json) as JobSpec;
}

/**
 * Near or far (one owner for the decision): an execution due within the lookahead is held by its
 * bucket; a later one waits in D1 until the sync pass brings it.
 */
export function isNear(dueAt: number, now: number, lookaheadMs: number): boolean {
  return dueAt <= now + lookaheadMs;
}

export const LIMITS = {
  bodyBytes: 64 * 1024,
  headerCount: 32,
  headerValueBytes: 2048,
  nameLength: 200,
  metadataBytes: 4 * 1024,
  batchJobs: 1000,
  /**
   * an attempt's timeout: at most 14 minutes, so an attempt, its flow-control wait and its report fit
   * in the 15 minutes a queue consumer invocation may run (docs/platform-limits.md)
   */
  timeoutMs: { min: 1_000, max: 14 * 60_000, default: 30_000 },
  maxAttempts: { min: 1, max: 100 },
  /** how far ahead a job may be scheduled */
  horizonMs: 366 * 86_400_000,
  idempotencyKeyLength: 200,
  debounceKeyLength: 200,
  flowControl: { keyLength: 128, rate: 10_000, periodSeconds: 86_400, parallelism: 1_000 },
  labels: { count: 16, keyLength: 63, valueLength: 128 },
  /** a pull worker's lease request */
  pull: {
    queueLength: 64,
    leaseMax: 100,
    leaseMs: { min: 1_000, max: 15 * 60_000, default: 30_000 },
    /** long polling: how long a lease request may wait for work */
    waitMs: { max: 20_000 },
  },
} as const;

/**
 * Headers a job may not set: the ones the scheduler writes on every delivery (the whole
 * `webhook-*` and `x-scheduler-*` namespaces, so a future header of ours never collides with a
 * job's, and `idempotency-key`), and the ones the HTTP connection owns.
 */
export function isReservedHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return RESERVED_PREFIXES.some((p) => lower.startsWith(p)) || RESERVED_NAMES.has(lower);
}
const RESERVED_PREFIXES = ["webhook-", "x-scheduler-"];
const RESERVED_NAMES = new Set([
  "idempotency-key",
  "host",
  "content-length",
  "connection",
  "transfer-encoding",
  "keep-alive",
  "upgrade",
  "te",
  "trailer",
]);
