/**
 * The pure half of the flush: finished executions as D1 rows and schedules as projections, by
 * D1 shard, and, once a shard has them, the rows that leave. The write to D1 is the shell's
 * (bucket.ts); a crash between the two re-runs those executions (at-least-once).
 */
import { oneOffExecutionId, shardOfId } from "../core/id";
import type { FinishedExecution, ScheduleProjection } from "../db/queries";
import type { Closing } from "./flight";
import { applyAll } from "./jobs";
import type { BucketState } from "./state";
import * as store from "./store";

/** outcomes written to D1 at once when this many wait, whatever the flush delay */
const FLUSH_NOW_AT = 1000;

/** What one flush writes: per shard, its finished executions and schedule projections. */
export interface Outcomes {
  closing: Closing[];
  /** the dirty schedules taken for this write */
  schedules: string[];
  byShard: Map<number, { finished: FinishedExecution[]; projections: ScheduleProjection[] }>;
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
  const finished: FinishedExecution[] = closing.map((c) => {
    const log = store.logOf(s.sql, c.row);
    if (c.last) log.push(c.last);
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
  const of = (index: number) => byShard.get(index) ?? byShard.set(index, { finished: [], projections: [] }).get(index)!;
  for (const f of finished) of(shardOfJob(f.jobId)).finished.push(f);
  for (const p of projections) of(shardOfJob(p.jobId)).projections.push(p);
  return { closing, schedules, byShard };
}

/** The write is over: the executions whose shard has them leave (rows deleted, tombstones remembered). */
export function settle(s: BucketState, outcomes: Outcomes, failedShards: Set<number>, at: number): void {
  const written = outcomes.closing.filter((c) => !failedShards.has(shardOfJob(c.row.jobId)));
  store.deleteExecutions(
    s.sql,
    written.map((c) => c.row),
  );
  for (const c of written) {
    s.executions.leave(c.row, at);
    if (!c.row.recurring) s.pullJobs.delete(c.row.jobId);
  }
}

/** Definitions that waited for their execution's outcome to land are applied. */
export function applyDeferred(s: BucketState, at: number): void {
  const deferred = [...s.deferred.values()].filter((d) => !s.executions.closing.has(oneOffExecutionId(d.jobId)));
  for (const d of deferred) s.deferred.delete(oneOffExecutionId(d.jobId));
  applyAll(s, deferred, at, false);
}

/** A failed write (of some shards, or all): its schedules are marked again for the next one. */
export function remark(s: BucketState, schedules: string[], failedShards?: Set<number>): void {
  for (const jobId of schedules) if (!failedShards || failedShards.has(shardOfJob(jobId))) s.dirtySchedules.add(jobId);
}
