/** Rows as the API shows them: RFC 3339 at the edge, camelCase, effective settings. */
import { occurrencesAfter } from "../core/cron";
import type { JobSpec } from "../core/job";
import { toRfc3339 } from "../core/when";
import type { AttemptRow, ExecutionRow, JobRow } from "../db/schema";

/** A job as the API shows it; `upcoming` > 0 lists that many next occurrences of a recurring job. */
export function presentJob(row: JobRow, now: number, upcoming = 0) {
  const spec = JSON.parse(row.spec) as JobSpec;
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
    target: spec.target,
    timeoutMs: spec.timeoutMs,
    retry: spec.retry,
    metadata: spec.metadata,
    idempotencyKey: row.idempotencyKey,
  };
}

export function presentAttempt(a: AttemptRow) {
  return {
    attempt: a.attempt,
    dueAt: toRfc3339(a.dueAt),
    startedAt: toRfc3339(a.startedAt),
    finishedAt: toRfc3339(a.finishedAt),
    outcome: a.outcome,
    httpStatus: a.httpStatus,
    error: a.error,
    lagMs: a.startedAt - a.dueAt,
  };
}

export function presentExecution(e: ExecutionRow, attempts?: AttemptRow[], liveStatus?: string) {
  return {
    id: e.id,
    jobId: e.jobId,
    dueAt: toRfc3339(e.dueAt),
    status: liveStatus ?? e.status,
    attempts: attempts ? attempts.map(presentAttempt) : e.attempts,
    lastHttpStatus: e.lastHttpStatus,
    lastError: e.lastError,
    deadReason: e.deadReason,
    finishedAt: toRfc3339(e.finishedAt),
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
