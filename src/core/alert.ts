/**
 * Alerts (issue 29 item 2): a tenant's alert target receives its dead executions as digests, at
 * most one delivery per DIGEST_INTERVAL_MS, each listing what died since the last (at most
 * DIGEST_MAX_LISTED, with the count of the rest). Pure: time is passed in; the tenant's Alerts
 * object (src/alerts/alerts.ts) keeps the pending deaths and sends.
 */
import { toRfc3339 } from "./when";

export const DIGEST_INTERVAL_MS = 10_000;
export const DIGEST_MAX_LISTED = 100;
/** deaths kept waiting for a digest at most (beyond it only counted): a burst of deaths never grows the object without bound */
export const PENDING_MAX = 1_000;

/** A dead execution as a digest lists it. */
export interface Death {
  executionId: string;
  jobId: string;
  deadAt: number;
  deadReason: string | null;
  attempts: number;
  lastHttpStatus: number | null;
  lastError: string | null;
}

/** When the next digest may go: at once if none went within the interval, else when it has passed. */
export function nextDigestAt(lastSentAt: number | null, now: number, intervalMs = DIGEST_INTERVAL_MS): number {
  return lastSentAt === null ? now : Math.max(now, lastSentAt + intervalMs);
}

/** Adds deaths to what waits (kept up to PENDING_MAX, the rest only counted in `dropped`), each execution once. */
export function addPending(pending: Death[], dropped: number, deaths: Death[]): { pending: Death[]; dropped: number } {
  const seen = new Set(pending.map((d) => d.executionId));
  const next = [...pending];
  let more = dropped;
  for (const d of deaths) {
    if (seen.has(d.executionId)) continue;
    seen.add(d.executionId);
    if (next.length < PENDING_MAX) next.push(d);
    else more += 1;
  }
  return { pending: next, dropped: more };
}

/** A digest of what waits: the first `max` deaths (oldest first) listed, the rest counted. */
export function digestOf(
  tenant: string,
  pending: Death[],
  dropped: number,
  now: number,
  max = DIGEST_MAX_LISTED,
): { body: Record<string, unknown>; listed: number } {
  const sorted = [...pending].sort((a, b) => a.deadAt - b.deadAt || (a.executionId < b.executionId ? -1 : 1));
  const listed = sorted.slice(0, max);
  const truncated = sorted.length - listed.length + dropped;
  return {
    listed: listed.length,
    body: {
      type: "executions.dead",
      tenant,
      count: sorted.length + dropped,
      truncated,
      sentAt: toRfc3339(now),
      executions: listed.map((d) => ({
        executionId: d.executionId,
        jobId: d.jobId,
        deadAt: toRfc3339(d.deadAt),
        deadReason: d.deadReason,
        attempts: d.attempts,
        lastHttpStatus: d.lastHttpStatus,
        lastError: d.lastError,
      })),
    },
  };
}
