/** Rows as the API shows them: RFC 3339 at the edge, camelCase, effective settings. */
import type { JobSpec } from "../core/job";
import { toRfc3339 } from "../core/when";
import type { AttemptRow, ExecutionRow, JobRow } from "../db/schema";

export function presentJob(row: JobRow) {
  const spec = JSON.parse(row.spec) as JobSpec;
  return {
    id: row.id,
    name: row.name,
    status: row.status,
    nextRunAt: row.status === "active" ? toRfc3339(row.nextRunAt) : null,
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
