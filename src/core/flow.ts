/**
 * Flow control of one key (issue 13): at most `rate` deliveries started per `periodMs` (a sliding
 * window, so no window of that length ever holds more), at most `parallelism` in flight, none
 * while paused or while the target asked to slow down (429/503 Retry-After). Pure: time comes in
 * as `now`; the FlowKey Durable Object owns one gate per tenant and key and keeps what must
 * survive a restart.
 *
 * Over the limit an execution waits: the gate answers when to ask again. Waiters are served in
 * order of their first due time: a free slot goes to an asker only if no earlier-due waiter that
 * is still asking could take it. A waiter that stops asking (its consumer died, its job was
 * canceled) is forgotten after its retry time plus WAITER_GRACE_MS.
 *
 * A job without a key of its own is governed by the implicit key of its target's origin (item 3):
 * the same gate, with only a parallelism limit (governingKey).
 */
import type { FlowControl } from "./job";

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

/**
 * Names of the implicit origin keys: `origin:` and the target's origin. A job's own key may not
 * start with it (api/schemas.ts), so the two never meet.
 */
export const ORIGIN_KEY_PREFIX = "origin:";

/** The implicit key of a URL's origin (scheme://host[:port], a default port left out), or null if it has none. */
export function originKeyOf(url: string): string | null {
  let origin: string;
  try {
    origin = new URL(url).origin;
  } catch {
    return null;
  }
  return origin === "null" ? null : ORIGIN_KEY_PREFIX + origin;
}

/** Whether a name is an origin key as originKeyOf spells it: one name per origin (no path, lower-case host, no default port). */
export function isOriginKey(name: string): boolean {
  return name.startsWith(ORIGIN_KEY_PREFIX) && originKeyOf(name.slice(ORIGIN_KEY_PREFIX.length)) === name;
}

/** The key a delivery asks and the limits it carries there. */
export interface GoverningKey {
  key: string;
  limits: FlowLimits;
}

/**
 * The key that governs a delivery: its job's own key, else the implicit key of its target's
 * origin with at most `originParallelism` in flight (0: none, the delivery asks no key).
 */
export function governingKey(flowControl: FlowControl | null, targetUrl: string | null, originParallelism: number): GoverningKey | null {
  if (flowControl) return { key: flowControl.key, limits: limitsOf(flowControl) };
  if (originParallelism <= 0 || targetUrl === null) return null;
  const key = originKeyOf(targetUrl);
  return key === null ? null : { key, limits: { rate: null, periodMs: 1_000, parallelism: originParallelism } };
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

/** a waiter that stopped asking is forgotten this long after the time it was told to ask again */
export const WAITER_GRACE_MS = 2_000;
/** how soon a waiter of a paused key asks again: grows with its wait, within these bounds */
export const PAUSED_RETRY_MS = { min: 1_000, max: 10_000 } as const;
/** a wait for a parallelism slot is at least this long (a poll never spins) */
const MIN_SLOT_WAIT_MS = 50;
/** before any delivery finished, a slot is assumed to free up after this long */
const INITIAL_DURATION_MS = 200;

interface Waiter {
  firstDueAt: number;
  forgetAt: number;
}

export class FlowGate {
  /** start times of the deliveries granted within the last period, oldest first */
  private readonly started: number[] = [];
  /** permits in flight, by execution id (a permit started at its lapse time minus its hold) */
  private readonly inFlight = new Map<string, Permit>();
  private readonly waiting = new Map<string, Waiter>();
  /** the next start time handed to a rate waiter: spreads waiters over the period instead of one herd */
  private nextRateSlot = 0;
  /** a moving average of how long a delivery holds its permit */
  private durationMs = INITIAL_DURATION_MS;
  private grantedTotal = 0;
  private throttledTotal = 0;

  constructor(
    public limits: FlowLimits,
    public paused = false,
    public throttledUntil: number | null = null,
  ) {}

  /** Answers each ask in order of first due time (then id), granting while the limits allow. */
  ask(asks: FlowAsk[], now: number): FlowAnswer[] {
    this.expire(now);
    for (const a of asks) {
      const known = this.waiting.get(a.executionId);
      // keep a waiter's place while it asks again
      this.waiting.set(a.executionId, { firstDueAt: Math.min(a.firstDueAt, known?.firstDueAt ?? a.firstDueAt), forgetAt: Infinity });
    }
    const order = asks
      .map((_, i) => i)
      .sort(
        (i, j) => compareWaiters(this.waiterOf(asks[i]!), asks[i]!.executionId, this.waiterOf(asks[j]!), asks[j]!.executionId) || i - j,
      );
    const answers: FlowAnswer[] = new Array(asks.length);
    for (const i of order) answers[i] = this.answerOne(asks[i]!, now);
    return answers;
  }

  /** Restores a permit granted before a restart. */
  restore(executionId: string, lapseAt: number, holdMs: number): void {
    this.inFlight.set(executionId, { lapseAt, holdMs });
  }

  /** The permit an execution holds, if any. */
  permitOf(executionId: string): Permit | undefined {
    return this.inFlight.get(executionId);
  }

  /** A delivery finished: its slot is free. `retryAfterMs` (a 429/503 Retry-After) holds the whole key that long. */
  release(executionId: string, now: number, retryAfterMs?: number): void {
    // a redelivered copy that was told to wait must not hold the key once the delivery ended
    this.waiting.delete(executionId);
    const permit = this.inFlight.get(executionId);
    if (permit !== undefined) {
      this.inFlight.delete(executionId);
      const startedAt = permit.lapseAt - permit.holdMs;
      if (now >= startedAt) this.durationMs = 0.8 * this.durationMs + 0.2 * (now - startedAt);
    }
    if (retryAfterMs !== undefined && retryAfterMs > 0) this.throttledUntil = Math.max(this.throttledUntil ?? 0, now + retryAfterMs);
  }

  view(now: number): FlowView {
    this.expire(now);
    return {
      limits: this.limits,
      paused: this.paused,
      throttledUntil: this.throttledUntil,
      inFlight: this.inFlight.size,
      waiting: this.waiting.size,
      currentRate: this.started.length,
      grantedTotal: this.grantedTotal,
      throttledTotal: this.throttledTotal,
    };
  }

  private answerOne(a: FlowAsk, now: number): FlowAnswer {
    const waiter = this.waiterOf(a);
    const wait = (retryAt: number): FlowAnswer => {
      const at = Math.max(retryAt, now + 1);
      waiter.forgetAt = at + WAITER_GRACE_MS;
      this.throttledTotal += 1;
      return { executionId: a.executionId, granted: false, retryAt: at };
    };
    if (this.inFlight.has(a.executionId)) {
      // asked again while holding a permit (a redelivered message): its slot is still taken
      return wait(now + this.durationMs);
    }
    if (this.paused) return wait(now + clamp(now - a.firstDueAt, PAUSED_RETRY_MS.min, PAUSED_RETRY_MS.max));
    if (this.throttledUntil !== null && this.throttledUntil > now) return wait(this.throttledUntil);
    const ahead = this.waitersAhead(a.executionId, waiter);
    const { rate, periodMs, parallelism } = this.limits;
    if (parallelism !== null && this.inFlight.size + ahead >= parallelism) {
      const rounds = Math.floor((this.inFlight.size + ahead - parallelism) / parallelism) + 1;
      return wait(now + Math.max(MIN_SLOT_WAIT_MS, Math.round(this.durationMs * rounds)));
    }
    if (rate !== null && this.started.length + ahead >= rate) {
      const spacing = periodMs / rate;
      // the earliest time a start leaves the window, then one spacing per waiter already told
      const freeAt = this.started.length >= rate ? this.started[this.started.length - rate]! + periodMs : now;
      const slot = Math.max(freeAt, this.nextRateSlot, now + spacing);
      this.nextRateSlot = slot + spacing;
      return wait(Math.ceil(slot));
    }
    this.waiting.delete(a.executionId);
    this.started.push(now);
    this.inFlight.set(a.executionId, { lapseAt: now + a.holdMs, holdMs: a.holdMs });
    this.grantedTotal += 1;
    return { executionId: a.executionId, granted: true };
  }

  /** Waiters still asking that come before this one. */
  private waitersAhead(executionId: string, waiter: Waiter): number {
    let ahead = 0;
    for (const [id, w] of this.waiting) if (id !== executionId && compareWaiters(w, id, waiter, executionId) < 0) ahead += 1;
    return ahead;
  }

  private waiterOf(a: FlowAsk): Waiter {
    let waiter = this.waiting.get(a.executionId);
    if (!waiter) {
      // the same execution twice in one ask, granted the first time: the second waits
      waiter = { firstDueAt: a.firstDueAt, forgetAt: Infinity };
      this.waiting.set(a.executionId, waiter);
    }
    return waiter;
  }

  private expire(now: number): void {
    const { periodMs } = this.limits;
    let old = 0;
    while (old < this.started.length && this.started[old]! <= now - periodMs) old += 1;
    if (old > 0) this.started.splice(0, old);
    for (const [id, permit] of this.inFlight) if (permit.lapseAt <= now) this.inFlight.delete(id);
    for (const [id, w] of this.waiting) if (w.forgetAt <= now) this.waiting.delete(id);
    if (this.throttledUntil !== null && this.throttledUntil <= now) this.throttledUntil = null;
  }
}

function compareWaiters(a: Waiter, aId: string, b: Waiter, bId: string): number {
  return a.firstDueAt - b.firstDueAt || (aId < bId ? -1 : aId > bId ? 1 : 0);
}

function clamp(value: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, value));
}
