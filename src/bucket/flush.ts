/**
 * The pure half of the flush: finished executions as D1 rows and schedules as projections, by
 * D1 shard, and, once a shard has them, the rows that leave. The write to D1 is flush-write.ts's,
 * run by the shell (bucket.ts); a crash between the two re-runs those executions (at-least-once).
 */
import { callbackBody, callbackExecutionId, callbackFor, callbackSpec, type StoredCallback } from "../core/callback";
import { oneOffExecutionId, shardOfId } from "../core/id";
import { type JobSpec, parseSpec } from "../core/job";
import type { CallbackOutcome, FinishedExecution, ScheduleProjection } from "../db/write-outcomes";
import type { Closing } from "./flight";
import { applyAll } from "./jobs";
import { type BucketState, insert, leave, noteSpec } from "./state";
import * as store from "./store";
import { type HeldRow, specOwnerOf } from "./store";

/** outcomes written to D1 at once when this many wait, whatever the flush delay */
const FLUSH_NOW_AT = 1000;

/** What one flush writes: per shard, its finished executions and schedule projections. */
export interface Outcomes {
  closing: Closing[];
  /** the dirty schedules taken for this write */
  schedules: string[];
  byShard: Map<number, { finished: FinishedExecution[]; projections: ScheduleProjection[]; callbacks: CallbackOutcome[] }>;
  /** callback executions to start once their parent's outcome is in D1, by parent id (core/callback.ts) */
  callbacks: Map<string, { row: Omit<HeldRow, "dueAt" | "occurrenceAt">; spec: JobSpec }>;
}

/** Whether outcomes or schedule changes wait and it is time to write them. */
export function flushDue(s: BucketState, now: number, flushAt: number): boolean {
  const waiting = s.executions.closing.size;
  return (waiting > 0 || s.dirtySchedules.size > 0) && (now >= flushAt || waiting >= FLUSH_NOW_AT);
}

/** Each job's shard (a job of a shard not bound here, the count lowered, waits like one whose shard failed). */
export function shardOfJob(jobId: string): number {
  return shardOfId(jobId) ?? 0;
}

/**
 * What to write now. The dirty schedules are taken, not copied: a schedule marked while the
 * write is on its way (a change, or its last occurrence closing) stays marked for the next flush.
 */
export function takeOutcomes(s: BucketState): Outcomes {
  const closing = [...s.executions.closing.values()];
  const callbacks: Outcomes["callbacks"] = new Map();
  // a callback's own outcome goes on its parent's row (never a callback of its own: no loop)
  const told: CallbackOutcome[] = closing.flatMap((c) => {
    const of = c.row.callback;
    if (!of) return [];
    const state: StoredCallback = {
      kind: of.kind,
      status: c.status === "succeeded" ? "succeeded" : "dead",
      attempts: c.attempts,
      id: c.row.id,
    };
    return [
      {
        tenant: c.row.tenant,
        jobId: c.row.jobId,
        executionId: of.of,
        // an occurrence due at its job's creation millisecond has the id a one-off's execution
        // would have: only a job without a schedule here is a one-off
        oneOff: of.of === oneOffExecutionId(c.row.jobId) && store.scheduleOf(s.sql, c.row.jobId) === undefined,
        callbackId: c.row.id,
        callbacks: JSON.stringify([state]),
      },
    ];
  });
  const finished: FinishedExecution[] = closing.flatMap((c) => {
    if (c.row.callback) return [];
    const log = store.logOf(s.sql, c.row);
    if (c.last) log.push(c.last);
    const planned = planCallback(s, c);
    if (planned) callbacks.set(c.row.id, planned);
    return {
      id: c.row.id,
      jobId: c.row.jobId,
      tenant: c.row.tenant,
      bucket: s.bucket ?? 0,
      recurring: c.row.recurring,
      occurrenceAt: c.row.occurrenceAt,
      occurrence: c.row.occurrence,
      status: c.status,
      attempts: c.attempts,
      lastHttpStatus: c.lastHttpStatus,
      lastError: c.lastError,
      deadReason: c.deadReason,
      finishedAt: c.finishedAt,
      attemptLog: log.length > 0 ? JSON.stringify(log.slice(-store.LOG_LIMIT)) : null,
      callbacks: planned
        ? JSON.stringify([
            { kind: planned.row.callback!.kind, status: "scheduled", attempts: 0, id: planned.row.id } satisfies StoredCallback,
          ])
        : null,
    };
  });
  const schedules = [...s.dirtySchedules];
  s.dirtySchedules.clear();
  const projections: ScheduleProjection[] = schedules.flatMap((jobId) => {
    const schedule = store.scheduleOf(s.sql, jobId);
    if (!schedule) return [];
    const live = s.executions.rowsOfJob(jobId).some((r) => !s.executions.closing.has(r.id));
    return [
      {
        tenant: schedule.tenant,
        jobId,
        version: schedule.version,
        nextRunAt: schedule.nextAt,
        fired: schedule.fired,
        completed: schedule.status === "active" && schedule.nextAt === null && !live,
      },
    ];
  });
  // one batch per shard, each job's outcome to its own shard: a failing shard delays only its own
  const byShard: Outcomes["byShard"] = new Map();
  const of = (index: number) => byShard.get(index) ?? byShard.set(index, { finished: [], projections: [], callbacks: [] }).get(index)!;
  for (const f of finished) of(shardOfJob(f.jobId)).finished.push(f);
  for (const p of projections) of(shardOfJob(p.jobId)).projections.push(p);
  for (const t of told) of(shardOfJob(t.jobId)).callbacks.push(t);
  return { closing, schedules, byShard, callbacks };
}

/** A stored spec, or null when there is none or it cannot be read (a poisoned one: its outcome must still reach D1). */
function readableSpec(json: string | null): JobSpec | null {
  if (json === null) return null;
  try {
    return parseSpec(json);
  } catch {
    return null;
  }
}

/**
 * The callback an outcome fires, if its job names one: its execution row (without a due time: it
 * starts when the parent's outcome is in D1) and spec. Decided from the job's spec as the bucket
 * holds it now (a PATCH while the attempt ran, a restart since the claim: the current one); the
 * whole spec is read only when it names the callback this outcome fires.
 */
function planCallback(s: BucketState, c: Closing): Outcomes["callbacks"] extends Map<string, infer V> ? V | null : never {
  if (c.status !== "succeeded" && c.status !== "dead") return null;
  if (!store.namesCallback(s.sql, c.row, c.status === "succeeded" ? "callback" : "failureCallback")) return null;
  const spec = readableSpec(store.specOf(s.sql, c.row));
  if (spec === null) return null;
  const fired = callbackFor(spec, c.status);
  if (!fired) return null;
  const body = callbackBody(fired.kind, {
    executionId: c.row.id,
    jobId: c.row.jobId,
    status: c.status as "succeeded" | "dead",
    attempts: c.attempts,
    httpStatus: c.lastHttpStatus,
    response: c.last?.response ?? null,
    error: c.lastError,
    deadReason: c.deadReason,
    dueAt: c.row.occurrenceAt,
    startedAt: c.last?.startedAt ?? null,
    finishedAt: c.finishedAt,
  });
  const { tenant, jobId } = c.row;
  return {
    row: {
      id: callbackExecutionId(c.row.id, fired.kind, c),
      jobId,
      tenant,
      version: 0,
      jobStatus: "active",
      occurrence: 1,
      attempt: 0,
      budgetBase: 0,
      recurring: false,
      callback: { of: c.row.id, kind: fired.kind },
    },
    spec: callbackSpec(spec, fired.target, body),
  };
}

/** The write is over: the executions whose shard has them leave (rows deleted, tombstones remembered). */
export function settle(s: BucketState, outcomes: Outcomes, failedShards: Set<number>, at: number): void {
  const written = outcomes.closing.filter((c) => !failedShards.has(shardOfJob(c.row.jobId)));
  store.deleteExecutions(
    s.sql,
    written.map((c) => c.row),
  );
  for (const c of written) {
    leave(s, c.row, at);
    // the parent's outcome is in D1: its callback starts now, in the same transaction as the
    // parent's row leaves (a crash keeps one of the two); one still telling of an earlier outcome
    // (a redriven execution died again meanwhile) has another id and runs on beside it
    const planned = outcomes.callbacks.get(c.row.id);
    if (!planned) continue;
    const row: HeldRow = { ...planned.row, dueAt: at, occurrenceAt: at };
    noteSpec(s, specOwnerOf(row), planned.spec); // its own spec: it waits under its own priority
    insert(s, row, JSON.stringify(planned.spec), null, "handOff");
  }
}

/** Definitions that waited for their execution's outcome to land are applied. */
export function applyDeferred(s: BucketState, at: number): void {
  const deferred = [...s.deferred.values()].filter((d) => !s.executions.closing.has(oneOffExecutionId(d.jobId)));
  for (const d of deferred) s.deferred.delete(oneOffExecutionId(d.jobId));
  applyAll(s, deferred, at, "outcome");
}

/** A failed write (of some shards, or all): its schedules are marked again for the next one. */
export function remark(s: BucketState, schedules: string[], failedShards?: Set<number>): void {
  for (const jobId of schedules) if (!failedShards || failedShards.has(shardOfJob(jobId))) s.dirtySchedules.add(jobId);
}
