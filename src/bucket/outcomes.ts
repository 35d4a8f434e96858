/**
 * What ends an attempt: a consumer's or pull worker's report (fenced by its lease, invariant 3),
 * an expired lease, flow control holding it back, or the queue giving up on its message
 * (poison). Each applies the retry rules (core/backoff.ts) and moves the execution through one
 * row of the lifecycle table (flight.ts); storage and memory only, the shell writes D1.
 */
import { decideAfterFailure, type FailureKind } from "../core/backoff";
import { isPullTarget, parseSpec } from "../core/job";
import { excerpt, RESPONSE_EXCERPT_LENGTH } from "../core/response";
import type { Lease } from "./flight";
import { liveLease } from "./leases";
import type { AttemptRecord, CompletionReport, CompletionResult, ExecutionRef, PoisonResult } from "./protocol";
import { type BucketState, close } from "./state";
import type { HeldRow } from "./store";
import * as store from "./store";

type Failure = {
  failure: FailureKind;
  label: string;
  httpStatus: number | null;
  error: string;
  retryAfterMs?: number | undefined;
  /** a wait the consumer spent for its flow-control key before the attempt started */
  flowWaitMs?: number;
};

/** An outcome, only if its token is the live lease (fencing): a zombie's report never overwrites a newer attempt. */
export function completeOne(s: BucketState, report: CompletionReport, now: number): CompletionResult {
  const lease = liveLease(s, report, now);
  if (!lease) return { ok: false, executionId: report.executionId, code: "stale_lease" };
  const row = s.executions.held.get(report.executionId)!;
  const outcome = report.outcome;
  if (outcome.kind === "wait") {
    // a pull lease is never held back by flow control (none on pull targets): its queue gives it back
    const status = lease.queue === undefined ? wait(s, row, lease, now, outcome.retryAt) : release(s, row, lease, lease.queue, now);
    return { ok: true, executionId: row.id, status };
  }
  // a wait the consumer spent for its flow-control key before the delivery started
  const flowWaitMs = report.flowWaitMs ?? 0;
  if (flowWaitMs > 0) s.tally.add("flow_waits_total", row.tenant);
  if (outcome.kind === "succeeded") {
    const attempt = attemptRecord(s, row, lease, now, "succeeded", outcome.httpStatus, null, flowWaitMs, outcome.excerpt);
    s.tally.add(row.callback ? "callbacks_succeeded_total" : "succeeded_total", row.tenant);
    if (row.callback) s.tally.add("callbacks_attempts_total", row.tenant);
    // the run time changed while it ran: it runs again at the new time, unless its job stopped since
    if (row.occurrenceAt !== lease.occurrenceAt && row.jobStatus === "active") {
      reschedule(s, row, attempt);
      return { ok: true, executionId: row.id, status: "scheduled" };
    }
    close(s, row, "succeed", now, { attempt, httpStatus: outcome.httpStatus });
    return { ok: true, executionId: row.id, status: "succeeded" };
  }
  const status = fail(s, row, lease, now, {
    failure: outcome.failure,
    label: outcome.failure,
    httpStatus: outcome.httpStatus,
    error: outcome.error,
    retryAfterMs: outcome.retryAfterMs,
    flowWaitMs,
  });
  return { ok: true, executionId: row.id, status };
}

/** Leases past their deadline fail as retryable attempts ("lease_expired"). */
export function expireLeases(s: BucketState, now: number): void {
  for (const [id, lease] of [...s.executions.expired(now)]) {
    const row = s.executions.held.get(id)!;
    s.tally.add("lease_expired_total", row.tenant);
    fail(s, row, lease, now, {
      failure: "retryable",
      label: "lease_expired",
      httpStatus: null,
      error: "the lease expired before the attempt completed (worker crashed or stalled)",
    });
  }
}

/**
 * The queue gave up on a message: only the dispatch it names, and only if no lease holds the
 * execution, becomes dead ("poison"): an old message never kills a healthy retry.
 */
export function poisonOne(s: BucketState, ref: ExecutionRef, now: number): PoisonResult {
  const row = s.executions.held.get(ref.executionId);
  if (!row || s.executions.closing.has(ref.executionId)) return { executionId: ref.executionId, code: "unknown" };
  if (row.dueAt !== ref.dueAt || !s.executions.can(row, "poison")) return { executionId: ref.executionId, code: "not_poisoned" };
  close(s, row, "poison", now, { reason: "poison", error: "the queue consumer failed on this message repeatedly" });
  return { executionId: ref.executionId, code: "marked_dead" };
}

/** A failed attempt: back off, die, or (the job was canceled or paused) end canceled (invariant 6). */
function fail(s: BucketState, row: HeldRow, lease: Lease, now: number, f: Failure): "scheduled" | "dead" | "canceled" {
  const error = excerpt(f.error);
  const attempt = attemptRecord(s, row, lease, now, f.label, f.httpStatus, error, f.flowWaitMs ?? 0);
  // a callback's attempts are its own count: the job counters (failed, retries) are the jobs' executions'
  s.tally.add(row.callback ? "callbacks_attempts_total" : "failed_attempts_total", row.tenant);
  // a stop first: a run time PATCHed and then a cancel while it ran ends it, not moves it
  if (row.jobStatus !== "active") {
    close(s, row, "abandon", now, { attempt, httpStatus: f.httpStatus, error, reason: row.jobStatus });
    return "canceled";
  }
  if (row.occurrenceAt !== lease.occurrenceAt) {
    reschedule(s, row, attempt);
    return "scheduled";
  }
  const spec = store.specOf(s.sql, row);
  const decision = spec
    ? decideAfterFailure({
        policy: parseSpec(spec).retry,
        attemptsUsed: attempt.attempt - row.budgetBase,
        failure: f.failure,
        retryAfterMs: f.retryAfterMs,
        now,
        rand: Math.random(),
      })
    : ({ kind: "dead", reason: "permanent" } as const);
  if (decision.kind === "dead") {
    close(s, row, "kill", now, { attempt, httpStatus: f.httpStatus, error, reason: decision.reason });
    return "dead";
  }
  const moved: HeldRow = { ...row, dueAt: decision.dueAt, attempt: attempt.attempt };
  store.moveExecution(s.sql, row.dueAt, moved, { attempt });
  s.executions.retry(row, moved);
  if (!row.callback) s.tally.add("retries_total", row.tenant);
  return "scheduled";
}

/** The run time changed while an attempt ran: the attempt goes into the log, it runs again at the new time with a fresh budget. */
function reschedule(s: BucketState, row: HeldRow, attempt: AttemptRecord): void {
  const moved: HeldRow = { ...row, attempt: attempt.attempt, budgetBase: attempt.attempt };
  store.moveExecution(s.sql, row.dueAt, moved, { attempt });
  s.executions.reschedule(row, moved);
}

/**
 * A pull lease its queue handed to nobody: the bucket's answer came after the queue stopped
 * waiting for it (a slow bucket), and the queue gives the lease back (pull/bucket-leases.ts askBucket,
 * issue 36 item 6). No attempt started, so none is used: while its job, due time and queue are
 * the same, it is offered in that queue again at its due time; else it is due again now, or
 * canceled with its job, as after a wait.
 */
function release(s: BucketState, row: HeldRow, lease: Lease, queue: string, now: number): "scheduled" | "canceled" {
  const spec = store.specOf(s.sql, row);
  const target = spec === null ? null : parseSpec(spec).target;
  const stillThere =
    row.jobStatus === "active" &&
    row.occurrenceAt === lease.occurrenceAt &&
    target !== null &&
    isPullTarget(target) &&
    target.pull === queue;
  if (!stillThere) return wait(s, row, lease, now, now, false);
  s.executions.release(row, queue); // its queue is told before this report is answered (bucket.ts tellQueues)
  return "scheduled";
}

/**
 * Flow control held the attempt back (its key was over its limits, paused, or slowed down by
 * its target): the lease ends and the execution is due again at `retryAt` without using an
 * attempt. The wait is not lateness: the lag is measured from the new due time, and the
 * attempt that runs records it as waitMs. `flowControl`: counted as a flow wait (a released pull
 * lease that cannot be offered again goes this way too, uncounted).
 */
function wait(s: BucketState, row: HeldRow, lease: Lease, now: number, retryAt: number, flowControl = true): "scheduled" | "canceled" {
  if (row.jobStatus !== "active") {
    close(s, row, "abandon", now, { reason: row.jobStatus });
    return "canceled";
  }
  // a reschedule meanwhile (PATCH) moved the row: it waits for whichever is later
  const from = row.occurrenceAt !== lease.occurrenceAt ? row.dueAt : now;
  const moved: HeldRow = { ...row, dueAt: Math.max(retryAt, from) };
  store.moveExecution(s.sql, row.dueAt, moved, {});
  s.executions.wait(row, moved);
  if (flowControl) s.tally.add("flow_waits_total", row.tenant);
  return "scheduled";
}

function attemptRecord(
  s: BucketState,
  row: HeldRow,
  lease: Lease,
  now: number,
  outcome: string,
  httpStatus: number | null,
  error: string | null,
  flowWaitMs: number,
  response = "",
): AttemptRecord {
  const waitedFrom = s.executions.endWait(row.id);
  // the wait in the bucket ends at the due time it waited for (from there to the claim is lag);
  // the consumer's wait for its key follows the claim
  const waitMs = (waitedFrom === undefined ? 0 : row.dueAt - waitedFrom) + flowWaitMs;
  return {
    attempt: lease.attempt,
    dueAt: row.dueAt,
    startedAt: lease.startedAt,
    finishedAt: now,
    outcome,
    httpStatus,
    error,
    ...(waitMs > 0 || waitedFrom !== undefined ? { waitMs } : {}),
    ...(response ? { response: excerpt(response, RESPONSE_EXCERPT_LENGTH) } : {}),
  };
}
