/**
 * Observation: the bucket's metrics (stored counters plus what the tally holds), its executions
 * by state (invariant 4 adds these up with D1), and live executions for reads that must not wait
 * for D1. Reads only.
 */
import type { BucketMetrics, CounterName } from "../core/metrics";
import type { BucketCounts, LiveExecution } from "./protocol";
import type { BucketState } from "./state";
import * as store from "./store";

export function readMetrics(s: BucketState): BucketMetrics {
  const counters = s.sql
    .exec<{ name: CounterName; tenant: string; reason: string; value: number }>("SELECT name, tenant, reason, value FROM counters")
    .toArray();
  const lag = s.sql.exec<{ tenant: string; le: number; count: number }>("SELECT tenant, le, count FROM lag_histogram").toArray();
  return s.tally.addTo({ counters, lag });
}

export function countByState(s: BucketState): BucketCounts {
  const byStatus: Record<string, number> = {};
  for (const row of s.executions.held.values()) {
    if (row.callback) continue; // not an accepted execution (invariant 4 counts those): its parent's callback
    const state = s.executions.closing.get(row.id)?.status ?? s.executions.stateOf(row);
    byStatus[state] = (byStatus[state] ?? 0) + 1;
  }
  return { byStatus };
}

export function inspect(s: BucketState, query: { jobId?: string; executionIds?: string[] }): LiveExecution[] {
  const rows =
    query.jobId !== undefined
      ? s.executions.rowsOfJob(query.jobId)
      : (query.executionIds ?? []).flatMap((id) => s.executions.held.get(id) ?? []);
  return rows.map((row) => {
    const closing = s.executions.closing.get(row.id);
    const log = store.logOf(s.sql, row);
    if (closing?.last) log.push(closing.last);
    return {
      executionId: row.id,
      jobId: row.jobId,
      status: closing?.status ?? (s.executions.stateOf(row) as LiveExecution["status"]),
      dueAt: row.dueAt,
      occurrenceAt: row.occurrenceAt,
      occurrence: row.occurrence,
      attempts: closing?.attempts ?? row.attempt,
      lastHttpStatus: closing?.lastHttpStatus ?? log[log.length - 1]?.httpStatus ?? null,
      lastError: closing?.lastError ?? log[log.length - 1]?.error ?? null,
      deadReason: closing?.deadReason ?? null,
      finishedAt: closing?.finishedAt ?? null,
      attemptLog: log,
    };
  });
}
