/**
 * Alerts (issue 29 item 2): a tenant's alert target receives its dead executions as digests, at
 * most one delivery per DIGEST_INTERVAL_MS, each listing what died since the last (at most
 * DIGEST_MAX_LISTED, with the count of the rest), and the flow keys its targets throttled longer
 * than the tenant's threshold (one entry per throttle episode, THROTTLE_EPISODE_GAP_MS below).
 * Pure: time is passed in; the tenant's Alerts object (src/alerts/alerts.ts) keeps what waits and
 * sends; a flow key (src/flow/flow-key.ts) follows its own throttle episode.
 */
import { toRfc3339 } from "./when";

export const DIGEST_INTERVAL_MS = 10_000;
export const DIGEST_MAX_LISTED = 100;
/** deaths kept waiting for a digest at most (beyond it only counted): a burst of deaths never grows the object without bound */
export const PENDING_MAX = 1_000;

/** The bounds of a tenant's throttle threshold (PUT /v1/alerts throttledForMs): a second to a day. */
export const THROTTLED_FOR_MS = { min: 1_000, max: 86_400_000 } as const;
/**
 * A key's slow-downs (a target's 429/503 Retry-After) chain into one episode while each starts at
 * most this long after the one before ended: the executions it held try again when it ends, and
 * the target's next Retry-After comes back a delivery later (30 s: a delivery's default timeout).
 */
export const THROTTLE_EPISODE_GAP_MS = 30_000;
/** throttled keys kept waiting for a digest at most (one per key: a later episode replaces it) */
export const THROTTLED_MAX = 100;

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

/**
 * A digest of what waits: the first `max` deaths (oldest first) listed, the rest counted, and the
 * throttled keys. Its type is "executions.dead" when anything died, else "flow.throttled".
 */
export function digestOf(
  tenant: string,
  pending: Death[],
  dropped: number,
  now: number,
  max = DIGEST_MAX_LISTED,
  throttles: Throttle[] = [],
): { body: Record<string, unknown>; listed: number } {
  const sorted = [...pending].sort((a, b) => a.deadAt - b.deadAt || (a.executionId < b.executionId ? -1 : 1));
  const listed = sorted.slice(0, max);
  const truncated = sorted.length - listed.length + dropped;
  return {
    listed: listed.length,
    body: {
      type: sorted.length + dropped > 0 ? "executions.dead" : "flow.throttled",
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
      throttled: throttledOf(throttles),
    },
  };
}

/** A flow key throttled by its target past the tenant's threshold, as a digest lists it. */
export interface Throttle {
  key: string;
  /** when the episode began (its first slow-down) */
  since: number;
  /** the end of its latest slow-down when it was reported */
  throttledUntil: number;
  thresholdMs: number;
}

/** One flow key's throttle episode: slowed down by its target since `since`, its slow-downs chained. */
export interface ThrottleEpisode {
  since: number;
  /** the end of its latest slow-down */
  until: number;
  /** the tenant's threshold when it began; null: the tenant wants no throttle alerts (or it is not known yet) */
  thresholdMs: number | null;
  reported: boolean;
}

/**
 * The episode after the key's slow-down was set or extended to `until` at `now`: the same one if a
 * slow-down of it is on or ended at most THROTTLE_EPISODE_GAP_MS ago, else a new one (`began`).
 */
export function throttleEpisodeAfter(
  episode: ThrottleEpisode | null,
  until: number,
  now: number,
): { episode: ThrottleEpisode; began: boolean } {
  if (episode !== null && now <= episode.until + THROTTLE_EPISODE_GAP_MS) {
    return { episode: { ...episode, until: Math.max(episode.until, until) }, began: false };
  }
  return { episode: { since: now, until, thresholdMs: null, reported: false }, began: true };
}

/** Whether the episode is to be reported at `now`: throttled without a break for longer than its threshold, not yet reported. */
export function throttleAlertDue(episode: ThrottleEpisode | null, now: number): boolean {
  if (episode === null || episode.thresholdMs === null || episode.reported) return false;
  return now - episode.since > episode.thresholdMs && now < episode.until;
}

/**
 * When to look again (the key's alarm): the moment the episode passes its threshold, if its
 * current slow-down lasts past it; null if it cannot (a later slow-down is looked at when it comes).
 */
export function throttleCheckAt(episode: ThrottleEpisode | null): number | null {
  if (episode === null || episode.thresholdMs === null || episode.reported) return null;
  const at = episode.since + episode.thresholdMs + 1;
  return at < episode.until ? at : null;
}

/** Adds a throttled key to what waits: one entry per key (its latest episode), at most THROTTLED_MAX. */
export function addThrottle(waiting: Throttle[], throttle: Throttle): Throttle[] {
  const others = waiting.filter((t) => t.key !== throttle.key);
  return others.length >= THROTTLED_MAX ? others : [...others, throttle];
}

/** The digest's list of throttled keys, oldest episode first. */
export function throttledOf(throttles: Throttle[]): Record<string, unknown>[] {
  return [...throttles]
    .sort((a, b) => a.since - b.since || (a.key < b.key ? -1 : 1))
    .map((t) => ({
      key: t.key,
      since: toRfc3339(t.since),
      throttledUntil: toRfc3339(t.throttledUntil),
      thresholdMs: t.thresholdMs,
    }));
}
