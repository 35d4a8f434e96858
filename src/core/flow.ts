/**
 * Flow control of one key (issue 13): at most `rate` deliveries started per `periodMs` (a sliding
 * window, so no window of that length ever holds more), at most `parallelism` in flight, none
 * while paused or while the target asked to slow down (429/503 Retry-After). This module holds
 * what a key is asked and answers (limits, asks, answers, its view), the gate's documented bounds,
 * and which key governs a delivery; the gate itself is flow-gate.ts, the implicit origin keys
 * origin-key.ts. Pure: time comes in as `now`; the FlowKey Durable Object owns one gate per
 * tenant and key and keeps what must survive a restart.
 *
 * A job without a key of its own is governed by the implicit key of its target's origin (item 3):
 * the same gate, with only a parallelism limit, held by ORIGIN_KEY_PARTS objects (governingKey).
 */
import { bucketOfExecution } from "./bucketing";
import type { FlowControl } from "./job";
import { originKeyOf, originKeyPart, originKeyParts, originPartParallelism } from "./origin-key";

export interface FlowLimits {
  /** deliveries started per period; null: no rate limit */
  rate: number | null;
  periodMs: number;
  /** deliveries in flight at once; null: no parallelism limit */
  parallelism: number | null;
}

/** A job's flow control as the gate counts it (periods in milliseconds). */
export function limitsOf(f: { rate: number | null; periodSeconds: number; parallelism: number | null }): FlowLimits {
  return { rate: f.rate, periodMs: f.periodSeconds * 1_000, parallelism: f.parallelism };
}

/** The key a delivery asks and the limits it carries there. */
export interface GoverningKey {
  key: string;
  limits: FlowLimits;
}

/**
 * The key that governs a delivery: its job's own, else the part of its target origin's implicit key
 * its execution names, with that part's share of `originParallelism` in flight (0: none, the
 * delivery asks no key).
 */
export function governingKey(
  flowControl: FlowControl | null,
  targetUrl: string | null,
  originParallelism: number,
  executionId: string,
): GoverningKey | null {
  if (flowControl) return { key: flowControl.key, limits: limitsOf(flowControl) };
  if (originParallelism <= 0 || targetUrl === null) return null;
  const key = originKeyOf(targetUrl);
  if (key === null) return null;
  const parts = originKeyParts(originParallelism);
  const part = bucketOfExecution(executionId, parts);
  return {
    key: originKeyPart(key, part),
    limits: { rate: null, periodMs: 1_000, parallelism: originPartParallelism(originParallelism, part, parts) },
  };
}

/** A permit in flight: when it lapses if never released, and how long it was granted for. */
export interface Permit {
  lapseAt: number;
  holdMs: number;
}

export interface FlowAsk {
  executionId: string;
  /** the due time it first had, before any wait: the order waiters are served in */
  firstDueAt: number;
  /** how long its permit may be held: the delivery's timeout plus the lease (a dead consumer's slot comes back then) */
  holdMs: number;
  /** its job's priority (core/priority.ts; absent: the default): higher waiters are served first, aging against starvation */
  priority?: number;
}

export type FlowAnswer = { executionId: string; granted: true } | { executionId: string; granted: false; retryAt: number };

export interface FlowView {
  limits: FlowLimits;
  paused: boolean;
  throttledUntil: number | null;
  inFlight: number;
  waiting: number;
  /** deliveries started in the last period */
  currentRate: number;
  grantedTotal: number;
  throttledTotal: number;
}

/** A key as the API shows it: its gate's view and where its limits come from. */
export interface FlowKeyView extends FlowView {
  /** "api": set with PATCH and kept until changed; "job": as the latest job asking carries them */
  limitsFrom: "api" | "job" | null;
}

/** A delivery that ended, as the consumer tells its key. */
export interface FlowRelease {
  executionId: string;
  /** a 429/503 Retry-After from the target: the whole key waits this long, at most FLOW_WAIT_MAX_MS */
  retryAfterMs?: number;
}

/** a waiter that stopped asking is forgotten this long after the time it was told to ask again */
export const WAITER_GRACE_MS = 2_000;
/** how soon a waiter of a paused key asks again: grows with its wait, within these bounds */
export const PAUSED_RETRY_MS = { min: 1_000, max: 10_000 } as const;
/**
 * The bounds of a gate's memory, whatever its callers do (limits it is given, consumers that
 * never release, waiters that never come back):
 * - `starts`: start times kept for the sliding window, and so the largest rate a gate enforces
 *   (a higher one counts as this: fewer starts than asked for, never more). It is the API's
 *   largest rate (LIMITS.flowControl.rate); without a rate limit only `currentRate` reads them,
 *   and it then shows at most this many.
 * - `permits`: permits in flight. Ten times the largest parallelism the API allows, and more
 *   than the fire consumers run at once (about 6,000), so only a key without a parallelism limit
 *   whose consumers never release reaches it; the oldest permit is dropped, as its lapse would.
 * - `waiters`: about 150 bytes each (its id, three numbers, the map's entry), so 1.5 MB of an
 *   object's 128 MB, and a whole period of slots at the largest rate. Past it a new asker is answered but not
 *   remembered (no place kept, no slot reserved) until a waiter is granted or forgotten: the
 *   places already given are never taken back. Time bounds them too: a waiter is forgotten at
 *   most maxWaitMs + WAITER_GRACE_MS after it last asked.
 */
export const FLOW_GATE_BOUNDS = { starts: 10_000, permits: 10_000, waiters: 10_000 } as const;
/**
 * A start reaches its target some time after the key granted it (the answer's way back, a
 * heartbeat after a wait, signing): two grants a period apart could reach the target closer than
 * that. So a key counts its starts over its period plus this margin: the target sees at most `rate`
 * starts in any period as long as a start lags its grant by less than this (issue 36 item 7: a key
 * of 5 per second was seen starting 6 within 998 ms). It costs a key of 5 per second 9% of its rate.
 */
export const RATE_START_SKEW_MS = 100;
