/**
 * Response schemas: what the API answers, as zod schemas. present.ts builds its answers as these
 * types (a field added there and not here is a type error), the OpenAPI document is generated from
 * them (openapi.ts), and the tests parse real answers with them (an answer that drifts fails).
 * Strict objects: a field the document does not name is a test failure, not a silent extra.
 */
import { z } from "zod";
import { DEBOUNCE_MODES } from "../core/debounce";
import { EXECUTION_STATES, JOB_STATES } from "../core/lifecycle";

const Instant = z.iso.datetime({ offset: true }).meta({ description: "RFC 3339, UTC" });

export const ErrorEnvelope = z
  .strictObject({
    error: z.strictObject({
      code: z.string().meta({ description: "machine-readable, e.g. invalid_field, not_found, rate_limited" }),
      message: z.string(),
      field: z.string().nullable().meta({ description: "the field at fault (jobs[3].target.url), or null" }),
    }),
  })
  .meta({ id: "Error" });

export const HttpTargetView = z
  .strictObject({
    url: z.string(),
    method: z.enum(["GET", "POST", "PUT", "PATCH", "DELETE"]),
    headers: z.record(z.string(), z.string()),
    body: z.string().nullable().meta({ description: "the body as it is sent (JSON bodies serialized)" }),
  })
  .meta({ id: "HttpTarget" });

export const WorkerTargetView = z
  .strictObject({
    worker: z.string().meta({ description: "the handler Worker, called over a service binding" }),
    payload: z.unknown().meta({ description: "the JSON value its deliver() method gets (null: none)" }),
  })
  .meta({ id: "WorkerTarget" });

export const PullTargetView = z
  .strictObject({
    pull: z.string().meta({ description: "the pull queue its executions wait in for a worker" }),
    payload: z.unknown().meta({ description: "the JSON value handed out with each lease (null: none)" }),
  })
  .meta({ id: "PullTarget" });

export const TargetView = z.union([HttpTargetView, WorkerTargetView, PullTargetView]).meta({ id: "Target" });

export const RetryView = z
  .strictObject({
    maxAttempts: z.number().int(),
    initialDelayMs: z.number().int(),
    maxDelayMs: z.number().int(),
    factor: z.number(),
    jitter: z.number(),
  })
  .meta({ id: "RetryPolicy" });

export const FlowControlView = z
  .strictObject({
    key: z.string(),
    rate: z.number().int().nullable(),
    periodSeconds: z.number().int(),
    parallelism: z.number().int().nullable(),
  })
  .meta({ id: "FlowControl" });

export const TraceView = z
  .strictObject({
    traceparent: z.string().meta({ description: "the parent of every attempt's span (version 00)" }),
    tracestate: z.string().optional().meta({ description: "passed on to every attempt as given" }),
  })
  .meta({ id: "Trace" });
/** A callback as the job keeps it: its URL and headers, or its handler Worker (the body is each outcome). */
export const CallbackTargetView = z
  .union([z.strictObject({ url: z.string(), headers: z.record(z.string(), z.string()) }), z.strictObject({ worker: z.string() })])
  .meta({ id: "CallbackTarget" });

/** An execution's callback: which, its state (scheduled until its outcome lands) and its attempts. */
export const CallbackView = z
  .strictObject({
    kind: z.enum(["success", "failure"]).meta({ description: "success: the job's callback; failure: its failureCallback" }),
    status: z.enum(["scheduled", "succeeded", "dead"]),
    attempts: z.number().int(),
  })
  .meta({ id: "Callback" });

/** The tenant's alert target (docs/alerts.md). */
export const AlertTargetView = z
  .strictObject({
    url: z.string(),
    headers: z.record(z.string(), z.string()),
    throttledForMs: z
      .number()
      .int()
      .nullable()
      .meta({ description: "a flow key throttled by its target without a break for longer than this is reported; null: never" }),
    digestIntervalMs: z.number().int().meta({ description: "at most one digest per this many milliseconds" }),
    digestMaxListed: z.number().int().meta({ description: "executions a digest lists at most; the rest are counted" }),
  })
  .meta({ id: "AlertTarget" });

export const ScheduleView = z
  .strictObject({
    cron: z.string(),
    timezone: z.string(),
    startAt: Instant.nullable(),
    endAt: Instant.nullable(),
    maxOccurrences: z.number().int().nullable(),
    catchUp: z.enum(["none", "one", "all"]),
  })
  .meta({ id: "Schedule" });

export const DebounceView = z
  .strictObject({
    key: z.string(),
    mode: z.enum(DEBOUNCE_MODES),
    delayMs: z.number().int(),
    maxDelayMs: z.number().int().nullable(),
    replaced: z.boolean().optional().meta({
      description:
        "create answers only: this create replaced the key's pending job (its target, settings and run time) instead of making a new one",
    }),
    absorbed: z.boolean().optional().meta({
      description: "create answers only (leading): this create was absorbed by the key's window; the job shown is the one that ran",
    }),
  })
  .meta({ id: "Debounce" });

export const JobView = z
  .strictObject({
    id: z.string(),
    name: z.string().nullable(),
    status: z.enum(JOB_STATES),
    nextRunAt: Instant.nullable(),
    schedule: ScheduleView.optional().meta({ description: "recurring jobs only" }),
    nextRuns: z.array(Instant).optional().meta({ description: "GET /v1/jobs/{id} of a recurring job: the next five occurrences" }),
    createdAt: Instant,
    updatedAt: Instant,
    target: TargetView,
    timeoutMs: z.number().int(),
    retry: RetryView,
    metadata: z.record(z.string(), z.unknown()).nullable(),
    // a union, not .nullable(): that would make the named schema itself nullable everywhere it is used
    flowControl: z.union([FlowControlView, z.null()]),
    trace: z.union([TraceView, z.null()]).meta({ description: "the W3C trace the job was created in (null: none)" }),
    priority: z.number().int().meta({ description: "0-9 (5 unless set): its turn among the tenant's due executions waiting" }),
    labels: z.record(z.string(), z.string()).meta({ description: "the job's labels ({} when none)" }),
    idempotencyKey: z.string().nullable(),
    debounce: DebounceView.optional().meta({ description: "debounced jobs only: the key and its rule" }),
    callback: CallbackTargetView.optional().meta({ description: "told each execution that succeeded (absent: none)" }),
    failureCallback: CallbackTargetView.optional().meta({ description: "told each execution that died (absent: none)" }),
  })
  .meta({ id: "Job" });

export const AttemptView = z
  .strictObject({
    attempt: z.number().int(),
    dueAt: Instant,
    startedAt: Instant,
    finishedAt: Instant.nullable(),
    outcome: z.string().nullable(),
    httpStatus: z.number().int().nullable(),
    error: z.string().nullable(),
    lagMs: z.number().meta({ description: "startedAt − dueAt" }),
    waitMs: z.number().meta({ description: "how long flow control held it back before dueAt (0: it did not wait)" }),
    responseExcerpt: z.string().nullable().meta({
      description: "a successful attempt's response body (a handler Worker's detail), its first 256 characters; a failure's is in error",
    }),
    spanId: z.string().nullable().meta({
      description: "the attempt's span id in the job's trace: the parent id of the traceparent it was sent (null: the job has no trace)",
    }),
  })
  .meta({ id: "Attempt" });

const executionFields = {
  id: z.string().meta({ description: "exe_…; also the webhook-id and Idempotency-Key of every delivery" }),
  jobId: z.string(),
  dueAt: Instant,
  status: z.enum(EXECUTION_STATES),
  lastHttpStatus: z.number().int().nullable(),
  lastError: z.string().nullable(),
  deadReason: z.string().nullable().meta({ description: "permanent, attempts_exhausted or poison" }),
  finishedAt: Instant.nullable(),
  callbacks: z.array(CallbackView).meta({ description: "the callback its outcome fired, if its job names one (docs/callbacks.md)" }),
};

export const ExecutionView = z
  .strictObject({ ...executionFields, attempts: z.number().int().meta({ description: "attempts made" }) })
  .meta({ id: "Execution" });

export const ArchivedExecutionView = z
  .strictObject({
    ...executionFields,
    attempts: z.number().int().meta({ description: "attempts made" }),
    archived: z.literal(true).meta({ description: "read from the history archive (R2): D1 no longer holds it" }),
    archiveKey: z.string().meta({ description: "the archive object holding it (GET /v1/archive/object?key=...)" }),
  })
  .meta({ id: "ArchivedExecution" });

export const ArchiveObjectView = z
  .strictObject({
    key: z.string().meta({ description: "the object's key in the archive bucket" }),
    size: z.number().int().meta({ description: "bytes (gzip)" }),
    executions: z.number().int().meta({ description: "lines: one per execution" }),
    firstId: z.string(),
    lastId: z.string(),
    uploadedAt: z.string(),
  })
  .meta({ id: "ArchiveObject" });

export const ArchiveList = z
  .strictObject({ objects: z.array(ArchiveObjectView), nextCursor: z.string().nullable() })
  .meta({ id: "ArchiveList" });

export const ExecutionWithAttemptsView = z
  .strictObject({ ...executionFields, attempts: z.array(AttemptView) })
  .meta({ id: "ExecutionWithAttempts" });

export const JobWithLatestView = JobView.extend({ latestExecution: z.union([ExecutionView, z.null()]) }).meta({
  id: "JobWithLatestExecution",
});

export const JobList = z.strictObject({ jobs: z.array(JobView), nextCursor: z.string().nullable() }).meta({ id: "JobList" });

export const ExecutionList = z
  .strictObject({ executions: z.array(ExecutionView), nextCursor: z.string().nullable() })
  .meta({ id: "ExecutionList" });

export const JobExecutions = z.strictObject({ executions: z.array(ExecutionWithAttemptsView) }).meta({ id: "JobExecutions" });

export const BatchResults = z
  .strictObject({
    results: z.array(
      z.union([
        z.strictObject({
          status: z.number().int().meta({
            description:
              "201 created, 200 an idempotent repeat or a debounced create that replaced or was absorbed (job.debounce says which)",
          }),
          job: JobView,
        }),
        ErrorEnvelope.extend({ status: z.number().int().meta({ description: "the status this item alone would get" }) }),
      ]),
    ),
  })
  .meta({ id: "BatchResults" });

export const RedrivenView = ExecutionView.extend({ redriven: z.literal(true) }).meta({ id: "RedrivenExecution" });

export const FlowKeyView = z
  .strictObject({
    key: z.string(),
    limits: z.strictObject({
      rate: z.number().int().nullable(),
      periodSeconds: z.number().int(),
      parallelism: z.number().int().nullable(),
      from: z.enum(["api", "job"]).nullable().meta({ description: "api: set with PATCH; job: the latest job asking" }),
    }),
    paused: z.boolean(),
    throttledUntil: Instant.nullable(),
    inFlight: z.number().int(),
    waiting: z.number().int(),
    currentRate: z.number().int(),
    grantedTotal: z.number().int(),
    throttledTotal: z.number().int(),
  })
  .meta({ id: "FlowKey" });

export const Metrics = z
  .strictObject({
    counters: z.record(z.string(), z.number()),
    dead_total_by_reason: z.record(z.string(), z.number()),
    d1_rows_written_total_by_shard: z.record(z.string(), z.number()).meta({ description: "D1 rows written per shard (its index)" }),
    d1_shards: z
      .array(
        z.strictObject({
          shard: z.number().int(),
          binding: z.string(),
          bytes: z.number().nullable().meta({ description: "the shard's size (meta.size_after); null when it did not answer" }),
          historyMaxBytes: z.number().meta({ description: "HISTORY_MAX_BYTES: above it history is purged before the retention" }),
          shardMaxBytes: z.number().meta({ description: "SHARD_MAX_BYTES: above it the shard takes no new jobs" }),
          oldestHistoryAt: z.string().nullable().meta({ description: "the oldest finished history it holds" }),
          error: z.string().optional(),
        }),
      )
      .meta({ description: "each D1 shard's size, watermarks and oldest history (the whole deployment's)" }),
    fire_lag_ms: z.strictObject({
      count: z.number().int(),
      p50: z.number().nullable(),
      p95: z.number().nullable(),
      p99: z.number().nullable(),
      buckets: z.array(z.strictObject({ le: z.string(), count: z.number().int() })),
    }),
    flowControl: z.strictObject({
      keys: z.array(z.union([FlowKeyView, ErrorEnvelope.extend({ key: z.string() })])),
      truncated: z.boolean(),
      error: ErrorEnvelope.shape.error.optional().meta({ description: "present when the key list could not be read" }),
    }),
  })
  .meta({ id: "Metrics" });

export const ActionView = z
  .strictObject({
    id: z.string().meta({ description: "act_…; GET /v1/actions/{id} follows it" }),
    kind: z.enum(["cancel", "pause", "resume", "redrive"]),
    status: z.enum(["running", "done"]),
    ids: z.number().int().optional().meta({ description: "given by ids: how many" }),
    filter: z
      .strictObject({
        status: z.string().optional(),
        label: z.string().optional(),
        jobId: z.string().optional(),
        deadReason: z.string().optional(),
      })
      .optional(),
    matched: z.number().int().meta({ description: "jobs (or dead executions) found so far" }),
    done: z.number().int(),
    failed: z.number().int().meta({ description: "the change was refused (or nothing was found by that id): failures lists the first 20" }),
    failures: z.array(
      z.strictObject({ id: z.string().meta({ description: "the job's id, or the execution's for a redrive" }), code: z.string() }),
    ),
    createdAt: Instant,
    finishedAt: Instant.nullable(),
  })
  .meta({ id: "BulkAction" });

export const Health = z.strictObject({ ok: z.literal(true) }).meta({ id: "Health" });

export type JobView = z.output<typeof JobView>;
export type TargetView = z.output<typeof TargetView>;
export type CallbackTargetView = z.output<typeof CallbackTargetView>;
export type AttemptView = z.output<typeof AttemptView>;
export type ExecutionView = z.output<typeof ExecutionView>;
export type ExecutionWithAttemptsView = z.output<typeof ExecutionWithAttemptsView>;
export type FlowKeyView = z.output<typeof FlowKeyView>;
export type ActionView = z.output<typeof ActionView>;

// --- pull workers ---------------------------------------------------------------------------

export const PullLeaseView = z
  .strictObject({
    token: z.string().meta({ description: "the lease token: heartbeat, complete or fail with it (opaque)" }),
    executionId: z.string().meta({ description: "the idempotency key of the work: the same on every attempt" }),
    jobId: z.string(),
    attempt: z.number().int().meta({ description: "1 for the first attempt" }),
    dueAt: z.string().meta({ description: "when this attempt was due" }),
    leaseDeadlineAt: z.string().meta({ description: "the lease ends then unless heartbeated; then the execution may run again" }),
    payload: z.unknown().meta({ description: "the job's target payload (null: none)" }),
    traceparent: z
      .string()
      .optional()
      .meta({ description: "when the job has a W3C trace: this attempt's span as the parent (a new span id per attempt)" }),
    tracestate: z.string().optional().meta({ description: "the job's tracestate, as given" }),
  })
  .meta({ id: "PullLease" });
export type PullLeaseView = z.infer<typeof PullLeaseView>;

export const PullLeasesView = z.strictObject({ leases: z.array(PullLeaseView) }).meta({ id: "PullLeases" });

export const PullQueueStatusView = z
  .strictObject({
    queue: z.string(),
    waiting: z.number().int().meta({ description: "executions due and waiting for a worker" }),
    oldestDueAt: z.string().nullable().meta({ description: "the due time of the oldest waiting one" }),
    pollers: z.number().int().meta({ description: "lease requests waiting for work right now (long polling)" }),
  })
  .meta({ id: "PullQueueStatus" });

export const PullHeartbeatView = z
  .strictObject({
    executionId: z.string(),
    leaseDeadlineAt: z.string(),
    canceled: z
      .boolean()
      .meta({ description: "the job was canceled or paused meanwhile: stop if you can (its result is kept if you finish)" }),
  })
  .meta({ id: "PullHeartbeat" });

export const PullReportView = z
  .strictObject({
    executionId: z.string(),
    status: z.enum(["succeeded", "scheduled", "dead", "canceled"]).meta({
      description: "what became of the execution: scheduled = it will be retried (or run again at a new time)",
    }),
  })
  .meta({ id: "PullReport" });
