/**
 * The bucket's RPC contract. RPCs return values, never throw for an outcome (errors lose their
 * properties across Durable Object RPC): `{ ok: true, ... } | { ok: false, code }`.
 */

import type { FlowControl, Target } from "../core/job";
import type { JobState } from "../core/lifecycle";
import type { DeliveryOutcome } from "../core/response";
import type { TraceContext } from "../core/trace";

/** One execution of a fire message: the due time names the dispatch (a retry has another). */
export interface FireRef {
  executionId: string;
  tenant: string;
  dueAt: number;
}

/**
 * What the bucket sends to a fire queue: a group of its executions sent by one alarm pass, ids
 * only (the claim returns each target). One message, one claim and one report for the group;
 * each execution keeps its own lease, fencing, attempts and dead letter.
 */
export interface FireGroup {
  v: 2;
  bucket: number;
  executions: FireRef[];
  /** deliveries the consumer failed on these executions so far (a group it passed on: consumer/fire.ts passOn) */
  tries?: number;
}

/** The single-execution message of earlier versions, still accepted: an upgrade may find some queued. */
export interface FireMessage {
  v: 1;
  executionId: string;
  bucket: number;
  tenant: string;
  dueAt: number;
}

/**
 * A job at one version, as D1 holds it: what its bucket applies (create, every change, the sync
 * pass). Applying is idempotent: an older or equal version than the bucket holds is a no-op.
 */
export interface JobDefinition {
  jobId: string;
  tenant: string;
  version: number;
  status: JobState;
  /** the JobSpec as JSON, serialized once at the edge */
  specJson: string;
  recurring: boolean;
  /** one-off: its run time; recurring: its next occurrence as D1 has it */
  nextRunAt: number | null;
  /** recurring: occurrences fired as D1 has it (the bucket keeps the larger count) */
  fired: number;
  /** one-off: attempts its execution has used (a redrive starts a fresh budget from here) */
  attempts: number;
  /** one-off: its attempts as D1 has them (JSON), kept when a redrive runs it again */
  attemptLog: string | null;
}

/** A job version the bucket holds now (applied, or already newer). */
export interface Applied {
  jobId: string;
  version: number;
}

/** What a scan's purge put to the history archive, counted with bucket 0's metrics. */
export interface ArchiveCount {
  executions: number;
  objects: number;
  bytes: number;
  /** shards whose archive write failed */
  failures: number;
}

/** D1 rows a caller wrote to one shard, counted with the bucket's metrics (d1_rows_written_total by shard). */
export interface D1Meter {
  shard: number;
  d1RowsWritten: number;
}

/** A recurring job's dead occurrence, to run again with a fresh attempt budget. */
export interface RedriveOrder {
  executionId: string;
  jobId: string;
  tenant: string;
  occurrenceAt: number;
  occurrence: number;
  attempts: number;
  /** its attempts as D1 has them (JSON), kept in its history */
  attemptLog: string | null;
}

export type RedriveResult = { executionId: string; ok: true } | { executionId: string; ok: false; code: "job_inactive" };

/** A fire message's execution: the due time names the dispatch (a retry has another). */
export interface ExecutionRef {
  executionId: string;
  dueAt: number;
}

export type ClaimResult =
  | LeaseGrant
  | PullOffer
  | { ok: false; executionId: string; code: "duplicate" | "unknown" | "not_due" | "not_offered" }
  /** the claim of this execution threw (its stored spec unreadable, a bug): its message is retried, the others of its group are not harmed */
  | { ok: false; executionId: string; code: "failed" };

/**
 * A pull target's execution is not leased by the claim: it waits for a pull worker. The consumer
 * hands it to its pull queue (src/pull/pull-queue.ts), which leases it from the bucket when a
 * worker asks (`leaseOffered`). A repeated claim of the same dispatch answers the same offer.
 */
export interface PullOffer {
  ok: false;
  code: "offered";
  executionId: string;
  tenant: string;
  queue: string;
  dueAt: number;
  /** its job's priority (core/priority.ts): the queue hands higher ones out first */
  priority: number;
}

/** What a pull queue keeps of an offer, and asks its bucket to lease. */
export interface OfferRef {
  executionId: string;
  bucket: number;
  dueAt: number;
  /** absent: the default (an offer of a bucket from before priorities) */
  priority?: number;
}

/** An offer as a pull queue holds it: the execution, at this due time, for this tenant and queue. */
export interface OfferedRef {
  executionId: string;
  dueAt: number;
  tenant: string;
  /** the pull queue asking: an execution is leased only from the queue it is offered in */
  queue: string;
}

/** A pull worker's lease request for one offered execution: its length is the worker's choice. */
export interface OfferedLeaseRef extends OfferedRef {
  leaseMs: number;
}

export type LeaseGrant = {
  ok: true;
  executionId: string;
  jobId: string;
  tenant: string;
  token: string;
  seq: number;
  leaseDeadlineAt: number;
  attempt: number;
  dueAt: number;
  target: Target;
  timeoutMs: number;
  flowControl: FlowControl | null;
  /** its due time before flow control made it wait (the order waiters are served in) */
  firstDueAt: number;
  /** the job's W3C trace: the attempt is sent as a child span of it (absent: none) */
  trace?: TraceContext;
  /** its job's priority (core/priority.ts): a flow-control key serves higher waiters first */
  priority: number;
};

export interface LeaseRef {
  executionId: string;
  token: string;
  /** a pull worker's report: the execution must be this tenant's (the API's caller) */
  tenant?: string;
}

/** Flow control held a leased attempt back before it started: it is due again at `retryAt`. */
export interface FlowWait {
  kind: "wait";
  retryAt: number;
}

export interface CompletionReport extends LeaseRef {
  outcome: DeliveryOutcome | FlowWait;
  /** how long the consumer waited for its flow-control key before the delivery started */
  flowWaitMs?: number;
}

export type CompletionResult =
  | { ok: true; executionId: string; status: "succeeded" | "scheduled" | "dead" | "canceled" }
  | { ok: false; executionId: string; code: "stale_lease" };

export type HeartbeatResult =
  /** `canceled`: the job was canceled or paused meanwhile; an attempt not started yet should not start */
  { ok: true; executionId: string; leaseDeadlineAt: number; canceled?: true } | { ok: false; executionId: string; code: "stale_lease" };

export type PoisonResult = { executionId: string; code: "marked_dead" | "not_poisoned" | "unknown" };

/** An execution the bucket holds, as the API shows it before D1 has its outcome. */
export interface LiveExecution {
  executionId: string;
  jobId: string;
  status: "scheduled" | "dispatched" | "running" | "succeeded" | "dead" | "canceled";
  dueAt: number;
  occurrenceAt: number;
  occurrence: number;
  attempts: number;
  lastHttpStatus: number | null;
  lastError: string | null;
  /** set once terminal (finished, not yet written to D1) */
  deadReason: string | null;
  finishedAt: number | null;
  attemptLog: AttemptRecord[];
}

/** One attempt as kept in the execution's log. */
export interface AttemptRecord {
  attempt: number;
  dueAt: number;
  startedAt: number;
  finishedAt: number | null;
  outcome: string | null;
  httpStatus: number | null;
  error: string | null;
  /** how long flow control held it back: from its first due time to `dueAt` (absent: it did not wait) */
  waitMs?: number;
  /** a successful attempt's response body (an HTTP target's) or detail (a handler Worker's), its first 256 characters; absent when empty */
  response?: string;
}

/** An attempt log as stored (D1 and the bucket keep it as JSON text); none is an empty log. */
export function parseAttemptLog(json: string | null): AttemptRecord[] {
  return json ? (JSON.parse(json) as AttemptRecord[]) : [];
}

export interface BucketCounts {
  byStatus: Record<string, number>;
}

export const RESULT_MESSAGES: Record<string, string> = {
  duplicate: "the execution holds a live lease, is finished or was rescheduled: this delivery is a duplicate",
  unknown: "the bucket does not hold this execution",
  not_due: "the execution is waiting for its (retry) due time",
  stale_lease: "the lease token is not the live lease of this execution",
  not_offered: "the execution is not waiting for a pull worker (leased, finished or moved)",
  offered: "the execution waits in its pull queue for a worker",
  job_inactive: "the job is paused or canceled",
};
