/**
 * Priority (issue 29 item 4): a job's `priority`, 0-9 (5 when absent), orders the executions of
 * one tenant that are already due and wait their turn: in a bucket's dispatch window
 * (bucket/due-queue.ts), among a flow-control key's waiters (core/flow-gate.ts) and among a pull
 * queue's offers (pull/pull-queue.ts). Higher goes first. It never makes an execution fire
 * before its due time and never changes the turns tenants take.
 *
 * No starvation, by aging: an execution's effective priority rises by one for every
 * PRIORITY_AGING_MS it has waited past its due time, up to the highest (9); equal effective
 * priorities go in due order. So one of priority p that has waited (9 - p) x PRIORITY_AGING_MS
 * is passed over by nothing that became due after it (PRIORITY_MAX_PASSED_OVER_MS for p = 0).
 * With one priority everywhere this is due order, as before.
 */

export const PRIORITY = { min: 0, max: 9, default: 5 } as const;

/** one step of effective priority per this much waiting past the due time */
export const PRIORITY_AGING_MS = 60_000;

/** the longest newer executions can go before a waiting one: priority 0 after 9 steps */
export const PRIORITY_MAX_PASSED_OVER_MS = (PRIORITY.max - PRIORITY.min) * PRIORITY_AGING_MS;

/** A job spec's priority (specs stored without one, or at the default, have none). */
export function priorityOf(spec: { priority?: number | null }): number {
  return spec.priority ?? PRIORITY.default;
}

/** Its priority after waiting since `dueAt` until `now`: one step more per PRIORITY_AGING_MS, at most the highest. */
export function effectivePriority(priority: number, dueAt: number, now: number): number {
  const waited = Math.max(0, now - dueAt);
  return Math.min(PRIORITY.max, priority + Math.floor(waited / PRIORITY_AGING_MS));
}

export interface Waiting {
  priority: number;
  /** when it became due (for a flow-control waiter: its first due time, before any wait) */
  dueAt: number;
}

/** Negative when `a` goes before `b` at `now`: the higher effective priority, then the earlier due time (0: the caller's tie). */
export function comparePriority(a: Waiting, b: Waiting, now: number): number {
  return effectivePriority(b.priority, b.dueAt, now) - effectivePriority(a.priority, a.dueAt, now) || a.dueAt - b.dueAt;
}
