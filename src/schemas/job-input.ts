/**
 * The body of a create (POST /v1/jobs, each job of a batch) and of a change (PATCH /v1/jobs/:id), with
 * their parts and the bodies that share them (an alert target, a flow key's limits): strict (an
 * unknown field is a 400 naming it), limits from core/job.ts. The other routes' bodies and queries:
 * requests.ts.
 */
import { z } from "zod";
import { WorkerName } from "../config";
import { THROTTLED_FOR_MS } from "../core/alert";
import { DEBOUNCE_MODES } from "../core/debounce";
import { LIMITS } from "../core/job";
import { ORIGIN_KEY_PREFIX } from "../core/origin-key";
import { PRIORITY, PRIORITY_AGING_MS } from "../core/priority";
import { PULL_QUEUE_NAME } from "../core/pull";
import { parseTraceparent, TRACESTATE_MAX_LENGTH, usableTracestate } from "../core/trace";

const HTTP_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const;

/** Most nesting a JSON body or metadata may have; checked without recursion (a deep value must not overflow the stack). */
export const MAX_JSON_DEPTH = 32;

function jsonDepth(value: unknown): number {
  let deepest = 0;
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [item, depth] = stack.pop()!;
    if (item === null || typeof item !== "object") continue;
    deepest = Math.max(deepest, depth);
    if (deepest > MAX_JSON_DEPTH) return deepest;
    for (const child of Object.values(item as Record<string, unknown>)) stack.push([child, depth + 1]);
  }
  return deepest;
}

/** Any JSON value (it came from JSON.parse), nested at most MAX_JSON_DEPTH levels. */
const JsonValue = z.unknown().refine((v) => jsonDepth(v) <= MAX_JSON_DEPTH, `must not nest deeper than ${MAX_JSON_DEPTH} levels`);

/** Header values travel as bytes: printable ASCII or Latin-1, no control characters (CR LF would inject headers). */
const HeaderValue = z
  .string()
  .max(LIMITS.headerValueBytes)
  .regex(/^[\t\x20-\x7e\x80-\xff]*$/, "must not contain control characters or characters outside Latin-1");

const HeadersInput = z
  .record(
    z
      .string()
      .min(1)
      .max(256)
      .regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, "is not a valid header name"),
    HeaderValue,
  )
  .refine((h) => Object.keys(h).length <= LIMITS.headerCount, `at most ${LIMITS.headerCount} headers`);

/** A pull queue's name, as a target names it and as the lease route's path has it. */
export const PullQueueName = z
  .string()
  .min(1)
  .max(LIMITS.pull.queueLength)
  .regex(PULL_QUEUE_NAME, "must be lower case letters, digits, - and _");

/**
 * An HTTP target (url, method, headers, body), a handler Worker (worker, payload) or a pull queue
 * (pull, payload): one object, so an error names the field at fault; create.ts's buildSpec
 * refuses a mix.
 */
const targetFields = {
  url: z.string().max(2048).meta({ description: "an HTTP target: the URL called (give one of url, worker and pull)" }),
  method: z.enum(HTTP_METHODS).meta({ description: "HTTP targets; default POST" }),
  headers: HeadersInput.meta({ description: "HTTP targets" }),
  body: JsonValue.meta({
    description: "HTTP targets: a string is sent as its UTF-8 bytes, exactly; any other JSON value is sent serialized (application/json)",
  }),
  worker: WorkerName.meta({
    description: "a handler Worker target: its name in HANDLER_WORKERS, granted to your tenant (give one of url, worker and pull)",
  }),
  pull: PullQueueName.meta({
    description:
      "a pull queue of your tenant: its executions wait there for workers that lease them (POST /v1/pull/{queue}/lease); give one of url, worker and pull",
  }),
  payload: JsonValue.meta({
    description: "handler Worker and pull targets: any JSON value, passed to deliver() or handed out with each lease",
  }),
};

export const TargetInput = z.strictObject({
  url: targetFields.url.optional(),
  method: targetFields.method.optional(),
  headers: targetFields.headers.optional(),
  body: targetFields.body.optional(),
  worker: targetFields.worker.optional(),
  pull: targetFields.pull.optional(),
  payload: targetFields.payload.optional(),
});

/**
 * A callback (callback, failureCallback): a URL or a handler Worker, checked by the same rules
 * as a job's target; it is sent the execution's outcome as a JSON POST body (or payload), so it
 * takes no method, body or payload of its own.
 */
export const CallbackInput = z
  .strictObject({
    url: targetFields.url.optional(),
    headers: targetFields.headers.optional(),
    worker: targetFields.worker.optional(),
  })
  .meta({ id: "CallbackInput", description: "a URL (with headers) or a handler Worker: give one of url and worker" });

/** PUT /v1/alerts: where the tenant's dead executions are sent as digests (docs/alerts.md). */
export const AlertTargetInput = z
  .strictObject({
    url: targetFields.url.meta({ description: "the URL each digest is POSTed to (the target rules of a job's url)" }),
    headers: targetFields.headers.optional(),
    throttledForMs: z.number().int().min(THROTTLED_FOR_MS.min).max(THROTTLED_FOR_MS.max).nullable().optional().meta({
      description:
        "also report a flow key of the tenant that its target throttled (429/503 Retry-After) without a break for longer than this (docs/alerts.md); null or absent: never",
    }),
  })
  .meta({ id: "AlertTargetInput" });

export const RetryInput = z.strictObject({
  maxAttempts: z.number().int().min(LIMITS.maxAttempts.min).max(LIMITS.maxAttempts.max).optional(),
  initialDelayMs: z.number().int().min(0).max(86_400_000).optional(),
  maxDelayMs: z
    .number()
    .int()
    .min(0)
    .max(7 * 86_400_000)
    .optional(),
  factor: z.number().min(1).max(10).optional(),
  jitter: z.number().min(0).max(1).optional(),
});

const Instant = z.union([z.string().max(64), z.number()]).meta({ description: "RFC 3339 with an offset, or epoch milliseconds" });
const Delay = z
  .union([z.string().max(64), z.number()])
  .meta({ description: '"500ms", "30s", "5m", "2h", "1d", or milliseconds', examples: ["30s", 5000] });

/** Text stored as is must be well-formed Unicode (a lone surrogate cannot be stored or compared reliably). */
const WellFormed = (max: number) =>
  z
    .string()
    .min(1)
    .max(max)
    .refine((s) => s.isWellFormed(), "must be well-formed Unicode (no lone surrogates)");

const ScheduleFields = {
  /** 5-field (minute) or 6-field (second) cron; excludes runAt/delay */
  cron: z
    .string()
    .min(1)
    .max(200)
    .optional()
    .meta({ description: "5 fields (minute) or 6 (seconds first); excludes runAt and delay", examples: ["0 9 * * 1-5"] }),
  timezone: z
    .string()
    .min(1)
    .max(64)
    .optional()
    .meta({ description: "an IANA zone, default UTC", examples: ["Europe/Berlin"] }),
  startAt: Instant.optional(),
  endAt: Instant.optional(),
  maxOccurrences: z.number().int().min(1).max(1_000_000_000).optional(),
  catchUp: z.enum(["none", "one", "all"]).optional(),
};

/**
 * A flow-control key names a group of jobs of one tenant (e.g. the API they all call). "origin:"
 * is reserved for the implicit keys of target origins (core/origin-key.ts), which the API names too.
 */
export const FlowKeyName = z
  .string()
  .min(1)
  .max(LIMITS.flowControl.keyLength)
  .regex(/^[A-Za-z0-9._:@-]+$/, "may contain only letters, digits and . _ : @ -")
  .refine((k) => !k.startsWith(ORIGIN_KEY_PREFIX), `may not start with "${ORIGIN_KEY_PREFIX}" (reserved for target origins)`)
  // a URL path normalizes them away, so /v1/flow-control/:key could never name them
  .refine((k) => k !== "." && k !== "..", 'may not be "." or ".."');

const FlowLimitFields = {
  rate: z.number().int().min(1).max(LIMITS.flowControl.rate).optional(),
  periodSeconds: z.number().int().min(1).max(LIMITS.flowControl.periodSeconds).optional(),
  parallelism: z.number().int().min(1).max(LIMITS.flowControl.parallelism).optional(),
};

export const FlowControlInput = z
  .strictObject({ key: FlowKeyName, ...FlowLimitFields })
  .refine((f) => f.rate !== undefined || f.parallelism !== undefined, "needs rate, parallelism or both");

/** PATCH /v1/flow-control/:key: limits that win over the jobs' until changed; null fields lift that limit. */
export const FlowLimitsInput = z.strictObject({
  rate: FlowLimitFields.rate.unwrap().nullable().optional(),
  periodSeconds: FlowLimitFields.periodSeconds,
  parallelism: FlowLimitFields.parallelism.unwrap().nullable().optional(),
});

/** A label's key: lower case letters, digits and . _ / -, starting and ending with a letter or digit. */
export const LabelKey = z
  .string()
  .min(1)
  .max(LIMITS.labels.keyLength)
  .regex(
    /^[a-z0-9]([a-z0-9._/-]*[a-z0-9])?$/,
    "must be lower case letters, digits and . _ / -, starting and ending with a letter or digit",
  );

export const LabelValue = z
  .string()
  .max(LIMITS.labels.valueLength)
  .refine((s) => !/\p{Cc}/u.test(s), "must not contain control characters")
  .refine((s) => s.isWellFormed(), "must be well-formed Unicode (no lone surrogates)");

/** A job's labels: what operators filter and act on (GET /v1/jobs?label=k:v). */
export const LabelsInput = z
  .record(LabelKey, LabelValue)
  .refine((l) => Object.keys(l).length <= LIMITS.labels.count, `at most ${LIMITS.labels.count} labels`)
  // no labels are null, however they are spelled: stored, hashed and shown alike
  .transform((l) => (Object.keys(l).length > 0 ? l : null))
  .meta({
    description: `at most ${LIMITS.labels.count} labels; keys ${LIMITS.labels.keyLength} characters, values ${LIMITS.labels.valueLength}`,
    examples: [{ team: "billing", env: "prod" }],
  });

/** W3C trace context in the body (per job of a batch); the create request's own headers are the other way in. */
export const TraceInput = z
  .strictObject({
    traceparent: z
      .string()
      .max(256)
      .refine((v) => parseTraceparent(v) !== null, "must be a W3C traceparent: 00-<32 hex>-<16 hex>-<2 hex>, ids not all zeros"),
    tracestate: z
      .string()
      .max(TRACESTATE_MAX_LENGTH)
      .refine((v) => usableTracestate(v) !== null, "must be printable ASCII")
      .optional(),
  })
  .meta({
    description:
      "the trace this job belongs to (W3C Trace Context); default: the create request's traceparent and tracestate headers. Each attempt is sent a child traceparent of it",
    examples: [{ traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" }],
  });
/**
 * Debounce by key (core/debounce.ts): within a tenant, a create with the key of a pending debounced
 * job replaces it (trailing) or is absorbed (leading). One-off jobs only; decides the run time.
 */
export const DebounceInput = z
  .strictObject({
    key: WellFormed(LIMITS.debounceKeyLength),
    delay: Delay.meta({ description: "trailing: the job runs this long after the latest create; leading: creates within it are absorbed" }),
    maxDelay: Delay.optional().meta({
      description:
        "at least delay: the job runs (trailing) or a new one may run (leading) at most this long after the window's first create",
    }),
    mode: z.enum(DEBOUNCE_MODES).default("trailing"),
  })
  .meta({ id: "DebounceInput" });
/** A job's priority among its tenant's due executions waiting their turn (core/priority.ts). */
export const PriorityInput = z
  .number()
  .int()
  .min(PRIORITY.min)
  .max(PRIORITY.max)
  .meta({
    description: `${PRIORITY.min}-${PRIORITY.max}, default ${PRIORITY.default}: among the tenant's due executions waiting their turn (dispatch, a flow-control key, a pull queue) higher goes first; one step higher per ${PRIORITY_AGING_MS / 1000} s waited, so none starves. Never earlier than its due time.`,
    examples: [9],
  });

/** A job's metadata: a JSON object nested at most MAX_JSON_DEPTH levels. */
const MetadataInput = z
  .record(z.string(), z.unknown())
  .refine((v) => jsonDepth(v) <= MAX_JSON_DEPTH, `must not nest deeper than ${MAX_JSON_DEPTH} levels`);

export const CreateJobInput = z.strictObject({
  name: WellFormed(LIMITS.nameLength).optional(),
  target: TargetInput,
  runAt: Instant.optional(),
  delay: Delay.optional(),
  ...ScheduleFields,
  timeoutMs: z.number().int().min(LIMITS.timeoutMs.min).max(LIMITS.timeoutMs.max).optional(),
  retry: RetryInput.optional(),
  metadata: MetadataInput.optional(),
  idempotencyKey: WellFormed(LIMITS.idempotencyKeyLength).optional(),
  flowControl: FlowControlInput.optional(),
  labels: LabelsInput.optional(),
  trace: TraceInput.optional(),
  debounce: DebounceInput.optional(),
  callback: CallbackInput.optional().meta({ description: "told each execution that succeeded (docs/callbacks.md)" }),
  failureCallback: CallbackInput.optional().meta({
    description: "told each execution that died after its last attempt (docs/callbacks.md)",
  }),
  priority: PriorityInput.optional(),
});
export type CreateJobInput = z.infer<typeof CreateJobInput>;

/** PATCH: any subset; target fields and retry fields merge into the job's current ones. */
export const PatchJobInput = z.strictObject({
  name: WellFormed(LIMITS.nameLength).nullable().optional(),
  /** merged into the current target; url, worker or pull switches its kind, dropping the other kinds' fields */
  target: TargetInput.optional(),
  runAt: Instant.optional(),
  delay: Delay.optional(),
  ...ScheduleFields,
  timeoutMs: z.number().int().min(LIMITS.timeoutMs.min).max(LIMITS.timeoutMs.max).optional(),
  retry: RetryInput.optional(),
  metadata: MetadataInput.nullable().optional(),
  flowControl: FlowControlInput.nullable().optional(),
  /** replaces the job's labels; null removes them */
  labels: LabelsInput.nullable().optional(),
  /** replace the job's callbacks; null removes one */
  callback: CallbackInput.nullable().optional(),
  failureCallback: CallbackInput.nullable().optional(),
  /** moves the job to another trace; null takes it out of any (its attempts then carry no traceparent) */
  trace: TraceInput.nullable().optional(),
  priority: PriorityInput.optional(),
});
export type PatchJobInput = z.infer<typeof PatchJobInput>;
