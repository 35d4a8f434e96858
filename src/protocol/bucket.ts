/**
 * The Bucket Durable Object's RPC contract (bucket/bucket.ts): what the API, the scanner, the fire
 * and dead-letter consumers and the pull queues send it, and what it answers. RPCs return values,
 * never throw for an outcome (errors lose their properties across Durable Object RPC):
 * `{ ok: true, ... } | { ok: false, code }`.
 *
 * During a deploy a bucket may run the previous release's code while callers run the new one, or
 * the reverse (test/contract/README.md): every change here is one both releases can read. Nothing
 * here is parsed at run time on the hot path; the contract test holds the code to it.
 */
import { z } from "zod";
import { DeliveryOutcomeSchema, FlowControlSchema, JobSpecSchema, JobStateSchema, jsonText, TargetSchema, TraceContextSchema } from "./job";

/** One attempt as kept in the execution's log. */
export const AttemptRecordSchema = z.object({
  attempt: z.number(),
  dueAt: z.number(),
  startedAt: z.number(),
  finishedAt: z.number().nullable(),
  outcome: z.string().nullable(),
  httpStatus: z.number().nullable(),
  error: z.string().nullable(),
  /** how long flow control held it back: from its first due time to `dueAt` (absent: it did not wait) */
  waitMs: z.number().optional(),
  /** a successful attempt's response body (an HTTP target's) or detail (a handler Worker's), its first 256 characters; absent when empty */
  response: z.string().optional(),
});
export type AttemptRecord = z.infer<typeof AttemptRecordSchema>;

/** An attempt log as stored (D1 and the bucket keep it as JSON text); none is an empty log. */
export function parseAttemptLog(json: string | null): AttemptRecord[] {
  return json ? (JSON.parse(json) as AttemptRecord[]) : [];
}

const AttemptLogText = jsonText(z.array(AttemptRecordSchema));

/**
 * A job at one version, as D1 holds it: what its bucket applies (create, every change, the sync
 * pass). Applying is idempotent: an older or equal version than the bucket holds is a no-op.
 */
export const JobDefinitionSchema = z.object({
  jobId: z.string(),
  tenant: z.string(),
  version: z.number(),
  status: JobStateSchema,
  /** the JobSpec as JSON, serialized once at the edge */
  specJson: jsonText(JobSpecSchema),
  recurring: z.boolean(),
  /** one-off: its run time; recurring: its next occurrence as D1 has it */
  nextRunAt: z.number().nullable(),
  /** recurring: occurrences fired as D1 has it (the bucket keeps the larger count) */
  fired: z.number(),
  /** one-off: attempts its execution has used (a redrive starts a fresh budget from here) */
  attempts: z.number(),
  /** one-off: its attempts as D1 has them (JSON), kept when a redrive runs it again */
  attemptLog: AttemptLogText.nullable(),
});
export type JobDefinition = z.infer<typeof JobDefinitionSchema>;

/** A job version the bucket holds now (applied, or already newer). */
export const AppliedSchema = z.object({ jobId: z.string(), version: z.number() });
export type Applied = z.infer<typeof AppliedSchema>;

/** What a scan's purge put to the history archive, counted with bucket 0's metrics. */
export const ArchiveCountSchema = z.object({
  executions: z.number(),
  objects: z.number(),
  bytes: z.number(),
  /** shards whose archive write failed */
  failures: z.number(),
});
export type ArchiveCount = z.infer<typeof ArchiveCountSchema>;

/** D1 rows a caller wrote to one shard, counted with the bucket's metrics (d1_rows_written_total by shard). */
export const D1MeterSchema = z.object({ shard: z.number(), d1RowsWritten: z.number() });
export type D1Meter = z.infer<typeof D1MeterSchema>;

/** A recurring job's dead occurrence, to run again with a fresh attempt budget. */
export const RedriveOrderSchema = z.object({
  executionId: z.string(),
  jobId: z.string(),
  tenant: z.string(),
  occurrenceAt: z.number(),
  occurrence: z.number(),
  attempts: z.number(),
  /** its attempts as D1 has them (JSON), kept in its history */
  attemptLog: AttemptLogText.nullable(),
});
export type RedriveOrder = z.infer<typeof RedriveOrderSchema>;

export const RedriveResultSchema = z.union([
  z.object({ executionId: z.string(), ok: z.literal(true) }),
  z.object({ executionId: z.string(), ok: z.literal(false), code: z.literal("job_inactive") }),
]);
export type RedriveResult = z.infer<typeof RedriveResultSchema>;

/** A fire message's execution: the due time names the dispatch (a retry has another). */
export const ExecutionRefSchema = z.object({ executionId: z.string(), dueAt: z.number() });
export type ExecutionRef = z.infer<typeof ExecutionRefSchema>;

export const LeaseGrantSchema = z.object({
  ok: z.literal(true),
  executionId: z.string(),
  jobId: z.string(),
  tenant: z.string(),
  token: z.string(),
  seq: z.number(),
  leaseDeadlineAt: z.number(),
  attempt: z.number(),
  dueAt: z.number(),
  target: TargetSchema,
  timeoutMs: z.number(),
  flowControl: FlowControlSchema.nullable(),
  /** its due time before flow control made it wait (the order waiters are served in) */
  firstDueAt: z.number(),
  /** the job's W3C trace: the attempt is sent as a child span of it (absent: none) */
  trace: TraceContextSchema.optional(),
  /** its job's priority (core/priority.ts): a flow-control key serves higher waiters first */
  priority: z.number(),
});
export type LeaseGrant = z.infer<typeof LeaseGrantSchema>;

/**
 * A pull target's execution is not leased by the claim: it waits for a pull worker. The consumer
 * hands it to its pull queue (src/pull/pull-queue.ts), which leases it from the bucket when a
 * worker asks (`leaseOffered`). A repeated claim of the same dispatch answers the same offer.
 */
export const PullOfferSchema = z.object({
  ok: z.literal(false),
  code: z.literal("offered"),
  executionId: z.string(),
  tenant: z.string(),
  queue: z.string(),
  dueAt: z.number(),
  /** its job's priority (core/priority.ts): the queue hands higher ones out first */
  priority: z.number(),
});
export type PullOffer = z.infer<typeof PullOfferSchema>;

export const ClaimResultSchema = z.union([
  LeaseGrantSchema,
  PullOfferSchema,
  z.object({ ok: z.literal(false), executionId: z.string(), code: z.enum(["duplicate", "unknown", "not_due", "not_offered"]) }),
  /** the claim of this execution threw (its stored spec unreadable, a bug): its message is retried, the others of its group are not harmed */
  z.object({ ok: z.literal(false), executionId: z.string(), code: z.literal("failed") }),
]);
export type ClaimResult = z.infer<typeof ClaimResultSchema>;

/** What a pull queue keeps of an offer, and asks its bucket to lease. */
export const OfferRefSchema = z.object({
  executionId: z.string(),
  bucket: z.number(),
  dueAt: z.number(),
  /** absent: the default (an offer of a bucket from before priorities) */
  priority: z.number().optional(),
});
export type OfferRef = z.infer<typeof OfferRefSchema>;

/** An offer as a pull queue holds it: the execution, at this due time, for this tenant and queue. */
export const OfferedRefSchema = z.object({
  executionId: z.string(),
  dueAt: z.number(),
  tenant: z.string(),
  /** the pull queue asking: an execution is leased only from the queue it is offered in */
  queue: z.string(),
});
export type OfferedRef = z.infer<typeof OfferedRefSchema>;

/** A pull worker's lease request for one offered execution: its length is the worker's choice. */
export const OfferedLeaseRefSchema = OfferedRefSchema.extend({ leaseMs: z.number() });
export type OfferedLeaseRef = z.infer<typeof OfferedLeaseRefSchema>;

export const LeaseRefSchema = z.object({
  executionId: z.string(),
  token: z.string(),
  /** a pull worker's report: the execution must be this tenant's (the API's caller) */
  tenant: z.string().optional(),
});
export type LeaseRef = z.infer<typeof LeaseRefSchema>;

/** Flow control held a leased attempt back before it started: it is due again at `retryAt`. */
export const FlowWaitSchema = z.object({ kind: z.literal("wait"), retryAt: z.number() });
export type FlowWait = z.infer<typeof FlowWaitSchema>;

export const CompletionReportSchema = LeaseRefSchema.extend({
  outcome: z.union([DeliveryOutcomeSchema, FlowWaitSchema]),
  /** how long the consumer waited for its flow-control key before the delivery started */
  flowWaitMs: z.number().optional(),
});
export type CompletionReport = z.infer<typeof CompletionReportSchema>;

export const CompletionResultSchema = z.union([
  z.object({ ok: z.literal(true), executionId: z.string(), status: z.enum(["succeeded", "scheduled", "dead", "canceled"]) }),
  z.object({ ok: z.literal(false), executionId: z.string(), code: z.literal("stale_lease") }),
]);
export type CompletionResult = z.infer<typeof CompletionResultSchema>;

export const HeartbeatResultSchema = z.union([
  /** `canceled`: the job was canceled or paused meanwhile; an attempt not started yet should not start */
  z.object({ ok: z.literal(true), executionId: z.string(), leaseDeadlineAt: z.number(), canceled: z.literal(true).optional() }),
  z.object({ ok: z.literal(false), executionId: z.string(), code: z.literal("stale_lease") }),
]);
export type HeartbeatResult = z.infer<typeof HeartbeatResultSchema>;

export const PoisonResultSchema = z.object({ executionId: z.string(), code: z.enum(["marked_dead", "not_poisoned", "unknown"]) });
export type PoisonResult = z.infer<typeof PoisonResultSchema>;

/** An execution the bucket holds, as the API shows it before D1 has its outcome. */
export const LiveExecutionSchema = z.object({
  executionId: z.string(),
  jobId: z.string(),
  status: z.enum(["scheduled", "dispatched", "running", "succeeded", "dead", "canceled"]),
  dueAt: z.number(),
  occurrenceAt: z.number(),
  occurrence: z.number(),
  attempts: z.number(),
  lastHttpStatus: z.number().nullable(),
  lastError: z.string().nullable(),
  /** set once terminal (finished, not yet written to D1) */
  deadReason: z.string().nullable(),
  finishedAt: z.number().nullable(),
  attemptLog: z.array(AttemptRecordSchema),
});
export type LiveExecution = z.infer<typeof LiveExecutionSchema>;

export const InspectQuerySchema = z.object({ jobId: z.string().optional(), executionIds: z.array(z.string()).optional() });

export const BucketCountsSchema = z.object({ byStatus: z.record(z.string(), z.number()) });
export type BucketCounts = z.infer<typeof BucketCountsSchema>;

export const PullWindowResultSchema = z.object({
  pulled: z.number(),
  synced: z.number(),
  redriven: z.number(),
  failedShards: z.array(z.number()),
});

/**
 * A counter's name (core/metrics.ts COUNTERS) on the wire: any name, as every release's tally keeps
 * and sums whatever name it is given. A release that adds a counter then reaches the previous
 * release's buckets and metrics readers without a break.
 */
export const CounterNameSchema = z.string();

export const BucketMetricsSchema = z.object({
  counters: z.array(z.object({ name: CounterNameSchema, tenant: z.string(), reason: z.string(), value: z.number() })),
  lag: z.array(z.object({ tenant: z.string(), le: z.number(), count: z.number() })),
});

export const RESULT_MESSAGES: Record<string, string> = {
  duplicate: "the execution holds a live lease, is finished or was rescheduled: this delivery is a duplicate",
  unknown: "the bucket does not hold this execution",
  not_due: "the execution is waiting for its (retry) due time",
  stale_lease: "the lease token is not the live lease of this execution",
  not_offered: "the execution is not waiting for a pull worker (leased, finished or moved)",
  offered: "the execution waits in its pull queue for a worker",
  job_inactive: "the job is paused or canceled",
};
