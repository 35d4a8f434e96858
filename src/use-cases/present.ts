/** Rows as the API shows them: RFC 3339 at the edge, camelCase, effective settings. */

import { type CallbackState, parseCallbacks } from "../core/callback";
import { occurrencesAfter } from "../core/cron";
import { oneOffExecutionId } from "../core/id";
import { type CallbackTarget, isHttpTarget, isWorkerTarget, parseSpec, type Target } from "../core/job";
import { type ExecutionState, isTerminal } from "../core/lifecycle";
import { priorityOf } from "../core/priority";
import { attemptSpanId } from "../core/trace";
import { toRfc3339 } from "../core/when";
import type { DeadLetterRow, JobRow, OccurrenceRow } from "../db/schema";
import { type AttemptRecord, type LiveExecution, parseAttemptLog } from "../protocol/bucket";
import type {
  AttemptView,
  CallbackTargetView,
  ExecutionView as ExecutionResponse,
  ExecutionWithAttemptsView,
  JobView,
  TargetView,
} from "../schemas/responses";

/** A job as the API shows it; `upcoming` > 0 lists that many next occurrences of a recurring job. */
export function presentJob(row: JobRow, now: number, upcoming = 0): JobView {
  const spec = parseSpec(row.spec);
  const schedule = spec.schedule;
  const active = row.status === "active";
  const next = schedule && active ? occurrencesAfter(schedule, now - 1, Math.max(1, upcoming), row.fired) : [];
  return {
    id: row.id,
    name: row.name,
    status: row.status,
    nextRunAt: !active ? null : schedule ? toRfc3339(next[0]) : toRfc3339(row.nextRunAt),
    ...(schedule
      ? {
          schedule: {
            cron: schedule.cron,
            timezone: schedule.timezone,
            startAt: toRfc3339(schedule.startAt),
            endAt: toRfc3339(schedule.endAt),
            maxOccurrences: schedule.maxOccurrences,
            catchUp: schedule.catchUp,
          },
          ...(upcoming > 0 ? { nextRuns: next.map((at) => toRfc3339(at)) } : {}),
        }
      : {}),
    createdAt: toRfc3339(row.createdAt),
    updatedAt: toRfc3339(row.updatedAt),
    target: presentTarget(spec.target),
    timeoutMs: spec.timeoutMs,
    retry: spec.retry,
    metadata: spec.metadata,
    flowControl: spec.flowControl ?? null,
    trace: spec.trace ?? null,
    priority: priorityOf(spec),
    labels: row.labels === null ? {} : (JSON.parse(row.labels) as Record<string, string>),
    idempotencyKey: row.idempotencyKey,
    ...(spec.debounce ? { debounce: { ...spec.debounce } } : {}),
    ...(spec.callback ? { callback: presentCallback(spec.callback) } : {}),
    ...(spec.failureCallback ? { failureCallback: presentCallback(spec.failureCallback) } : {}),
  };
}

function presentCallback(target: CallbackTarget): CallbackTargetView {
  return isWorkerTarget(target) ? { worker: target.worker } : { url: target.url, headers: target.headers };
}

/** A worker target's payload as the JSON value it was given; an HTTP target as it is sent. */
function presentTarget(target: Target): TargetView {
  if (isHttpTarget(target)) return target;
  const payload = target.payload === null ? null : JSON.parse(target.payload);
  return isWorkerTarget(target) ? { worker: target.worker, payload } : { pull: target.pull, payload };
}

/**
 * An attempt as the API shows it. `spanId`: the attempt's span in the job's trace (core/trace.ts),
 * given the execution id when the job was created in a trace; null otherwise.
 */
export function presentAttempt(a: AttemptRecord, tracedExecutionId?: string): AttemptView {
  return {
    attempt: a.attempt,
    dueAt: toRfc3339(a.dueAt),
    startedAt: toRfc3339(a.startedAt),
    finishedAt: toRfc3339(a.finishedAt),
    outcome: a.outcome,
    httpStatus: a.httpStatus,
    error: a.error,
    lagMs: a.startedAt - a.dueAt,
    /** how long flow control held it back before its due time above (0: it did not wait) */
    waitMs: a.waitMs ?? 0,
    responseExcerpt: a.response ?? null,
    spanId: tracedExecutionId === undefined ? null : attemptSpanId(tracedExecutionId, a.attempt),
  };
}

/** One shape for every source of an execution: the bucket (live), a one-off job row, history, the DLQ. */
export interface ExecutionView {
  id: string;
  jobId: string;
  dueAt: number;
  status: ExecutionState;
  attempts: number;
  attemptLog: AttemptRecord[];
  lastHttpStatus: number | null;
  lastError: string | null;
  deadReason: string | null;
  finishedAt: number | null;
  /** its callbacks (D1's callbacks column); none while live */
  callbacks?: CallbackState[];
}

/** An execution with its attempts counted (`presentExecutionWithAttempts` lists them). */
export function presentExecution(e: ExecutionView): ExecutionResponse {
  return {
    id: e.id,
    jobId: e.jobId,
    dueAt: toRfc3339(e.dueAt),
    status: e.status,
    attempts: e.attempts,
    lastHttpStatus: e.lastHttpStatus,
    lastError: e.lastError,
    deadReason: e.deadReason,
    finishedAt: toRfc3339(e.finishedAt),
    callbacks: e.callbacks ?? [],
  };
}

/** `traced`: the job was created in a trace, so each attempt shows its span id. */
export function presentExecutionWithAttempts(e: ExecutionView, traced = false): ExecutionWithAttemptsView {
  return { ...presentExecution(e), attempts: e.attemptLog.map((a) => presentAttempt(a, traced ? e.id : undefined)) };
}

export function viewOfLive(e: LiveExecution): ExecutionView {
  return {
    id: e.executionId,
    jobId: e.jobId,
    dueAt: e.occurrenceAt,
    status: e.status,
    attempts: e.attempts,
    attemptLog: e.attemptLog,
    lastHttpStatus: e.lastHttpStatus,
    lastError: e.lastError,
    deadReason: e.deadReason,
    finishedAt: e.finishedAt,
  };
}

/** A one-off job's execution as D1 has it: its outcome once terminal, else pending (not held) or canceled with the job. */
export function viewOfOneOff(
  job: Pick<
    JobRow,
    | "id"
    | "status"
    | "runStatus"
    | "nextRunAt"
    | "createdAt"
    | "updatedAt"
    | "attempts"
    | "attemptLog"
    | "lastHttpStatus"
    | "lastError"
    | "deadReason"
    | "finishedAt"
  > &
    Partial<Pick<JobRow, "callbacks">>,
): ExecutionView {
  const status = job.runStatus !== null && isTerminal(job.runStatus) ? job.runStatus : job.status === "canceled" ? "canceled" : "pending";
  return {
    id: oneOffExecutionId(job.id),
    jobId: job.id,
    dueAt: job.nextRunAt ?? job.createdAt,
    status,
    attempts: job.attempts,
    attemptLog: parseAttemptLog(job.attemptLog),
    lastHttpStatus: job.lastHttpStatus,
    lastError: job.lastError,
    deadReason: job.deadReason,
    finishedAt: job.finishedAt ?? (status === "canceled" ? job.updatedAt : null),
    callbacks: parseCallbacks(job.callbacks ?? null),
  };
}

export function viewOfOccurrence(o: OccurrenceRow): ExecutionView {
  return {
    id: o.id,
    jobId: o.jobId,
    dueAt: o.dueAt,
    status: o.status,
    attempts: o.attempts,
    attemptLog: parseAttemptLog(o.attemptLog),
    lastHttpStatus: o.lastHttpStatus,
    lastError: o.lastError,
    deadReason: o.deadReason,
    finishedAt: o.finishedAt,
    callbacks: parseCallbacks(o.callbacks),
  };
}

export function viewOfDeadLetter(d: DeadLetterRow): ExecutionView {
  return {
    id: d.executionId,
    jobId: d.jobId,
    dueAt: d.dueAt,
    status: "dead",
    attempts: d.attempts,
    attemptLog: [],
    lastHttpStatus: d.lastHttpStatus,
    lastError: d.lastError,
    deadReason: d.deadReason,
    finishedAt: d.deadAt,
  };
}

/** Opaque cursor over (number, id). */
export function encodeCursor(at: number, id: string): string {
  return btoa(`${at}:${id}`).replace(/=+$/, "");
}

export function decodeCursor(cursor: string): { at: number; id: string } | null {
  try {
    const [at, id] = atob(cursor).split(":");
    const n = Number(at);
    return Number.isSafeInteger(n) && id ? { at: n, id } : null;
  } catch {
    return null;
  }
}
