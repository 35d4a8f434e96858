/**
 * Flow control of one key (issue 13): at most `rate` deliveries started per `periodMs` (a sliding
 * window, so no window of that length ever holds more), at most `parallelism` in flight, none
 * while paused or while the target asked to slow down (429/503 Retry-After). Pure: time comes in
 * as `now`; the FlowKey Durable Object owns one gate per tenant and key and keeps what must
 * survive a restart.
 *
 * Over the limit an execution waits: the gate answers when to ask again (never later than
 * maxWaitMs). Over the rate a waiter is given a slot, a time the sliding window will have room
 * for it, and starts when it comes back then: a slot once told is not given to anyone else.
 * Otherwise waiters are served by priority, aged by their wait since their first due time
 * (core/priority.ts: with one priority, in order of first due time). A waiter that stops asking
 * (its consumer died, its job was canceled) is forgotten, with its slot, after its retry time
 * plus WAITER_GRACE_MS. Every collection the gate keeps is bounded (FLOW_GATE_BOUNDS).
 *
 * A job without a key of its own is governed by the implicit key of its target's origin (item 3):
 * the same gate, with only a parallelism limit, held by ORIGIN_KEY_PARTS objects (governingKey).
 */
import { bucketOfExecution } from "./bucketing";
import type { FlowControl } from "./job";
import { comparePriority, PRIORITY } from "./priority";

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
 * start with it (schemas/job-input.ts), so the two never meet.
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
 * An origin's implicit key is held by up to this many objects (its parts), each with its share of
 * the parallelism: every key-less delivery asks and releases its origin's key, about 0.3-0.5
 * requests per execution, so at 10,000 executions/s to one origin a single object would take
 * 3,000-5,000 requests/s against a Durable Object's soft limit of 1,000 (docs/platform-limits.md);
 * 16 parts take under 320 each. An execution asks the part its bucket's hash names
 * (bucketOfExecution): a bucket's groups ask one part. A target's slow-down reaches every part (the
 * part that heard it tells the others: FlowKey.release).
 */
export const ORIGIN_KEY_PARTS = 16;

/**
 * A part holds at least this many slots: an origin's executions spread over the parts by hash, so a
 * part of few slots would often be full while another sits idle (with a parallelism of 2 in two
 * parts, two deliveries could not always run at once). A key of lower parallelism has one part:
 * its throughput, and so its requests, are small (at most parallelism ÷ a target's answer time).
 */
export const ORIGIN_PART_MIN_PARALLELISM = 32;

/** How many parts hold an origin key allowing `parallelism` in flight. */
export function originKeyParts(parallelism: number): number {
  return Math.max(1, Math.min(ORIGIN_KEY_PARTS, Math.floor(parallelism / ORIGIN_PART_MIN_PARALLELISM)));
}

/** One part's share of `parallelism` over `parts` (the shares add up to it; at least 1 each). */
export function originPartParallelism(parallelism: number, part: number, parts: number): number {
  return Math.max(1, Math.floor(parallelism / parts) + (part < parallelism % parts ? 1 : 0));
}

/** The object name of one part of an origin key: `origin:https://api.example.com#3`. */
export function originKeyPart(originKey: string, part: number): string {
  return `${originKey}#${part}`;
}

/** The origin key and part a part's name spells, or null when `name` is not one. */
export function originKeyOfPart(name: string): { originKey: string; part: number } | null {
  const at = name.lastIndexOf("#");
  if (at < 0) return null;
  const base = name.slice(0, at);
  const part = name.slice(at + 1);
  return /^(0|[1-9][0-9]?)$/.test(part) && Number(part) < ORIGIN_KEY_PARTS && isOriginKey(base)
    ? { originKey: base, part: Number(part) }
    : null;
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
/** a wait for a parallelism slot is at least this long (a poll never spins) */
const MIN_SLOT_WAIT_MS = 50;
/**
 * A start reaches its target some time after the key granted it (the answer's way back, a
 * heartbeat after a wait, signing): two grants a period apart could reach the target closer than
 * that. So a key counts its starts over its period plus this margin: the target sees at most `rate`
 * starts in any period as long as a start lags its grant by less than this (issue 36 item 7: a key
 * of 5 per second was seen starting 6 within 998 ms). It costs a key of 5 per second 9% of its rate.
 */
export const RATE_START_SKEW_MS = 100;
/** before any delivery finished, a slot is assumed to free up after this long */
const INITIAL_DURATION_MS = 200;

interface Waiter {
  executionId: string;
  firstDueAt: number;
  priority: number;
  /** its retry time plus WAITER_GRACE_MS (Infinity while it asks): then it stopped asking */
  forgetAt: number;
  /** the rate slot it was told: it may start at or after this time, before anyone without one; null: none */
  slotAt: number | null;
  /** a slow-down (Retry-After) told it to wait: when that ends it goes before anyone due after it */
  heldBySlowDown: boolean;
}

export interface FlowGateOptions {
  /**
   * the longest wait one answer gives, and so the longest a target's Retry-After holds the key
   * (config FLOW_WAIT_MAX_MS): a waiter whose slot is farther asks again after this long, keeping it
   */
  maxWaitMs: number;
  paused?: boolean;
  /** a slow-down kept across a restart; it holds at most maxWaitMs from the gate's first ask */
  throttledUntil?: number | null;
}

export class FlowGate {
  /** start times of the deliveries granted within the last period, oldest first */
  private readonly started: number[] = [];
  /** permits in flight, by execution id, oldest grant first (a permit started at its lapse time minus its hold) */
  private readonly inFlight = new Map<string, Permit>();
  private readonly waiting = new Map<string, Waiter>();
  /** the reserved rate slots (each a waiter's slotAt), ascending */
  private slots: number[] = [];
  private isPaused: boolean;
  throttledUntil: number | null;
  readonly maxWaitMs: number;
  /** a moving average of how long a delivery holds its permit; null until one finished */
  private measuredMs: number | null = null;
  private grantedTotal = 0;
  private throttledTotal = 0;

  constructor(
    /** the limits the next ask is answered under; changing them keeps the rate slots told (dropSlots voids them) */
    public limits: FlowLimits,
    options: FlowGateOptions,
  ) {
    this.maxWaitMs = options.maxWaitMs;
    this.isPaused = options.paused ?? false;
    this.throttledUntil = options.throttledUntil ?? null;
  }

  get paused(): boolean {
    return this.isPaused;
  }

  /** A pause (or its end) voids the reserved slots: their waiters are told to ask again later than them. */
  set paused(paused: boolean) {
    if (paused !== this.isPaused) this.dropSlots();
    this.isPaused = paused;
  }

  /**
   * Answers each ask in order of first due time (then id), granting while the limits allow.
   *
   * Rate: a waiter over the rate is given a slot, the earliest time the sliding window has room
   * for it after every slot already given (spaced periodMs / rate apart), and told to ask again
   * then. Coming back at or after its slot it starts if the window has room (the check of past
   * starts is what keeps every window within the rate); a waiter that came late and finds the
   * window full gets the next time a start leaves it. An asker without a slot starts only if
   * the window has room beyond every slot due within the next period, so it never takes one
   * that was promised; a slot whose waiter never comes back is forgotten with it
   * (WAITER_GRACE_MS after its time). Slots keep the order of first due time within one call
   * and the order of asking across calls.
   *
   * Parallelism: a free slot goes to an asker only if no earlier-due waiter still asking could
   * take it (a waiter with a rate slot is not counted: its slot is its place); the refused are
   * told to ask again after about as many average delivery times as there are rounds of waiters
   * ahead of them, or, if the key has a rate too, at a rate slot they are given then.
   */
  ask(asks: FlowAsk[], now: number): FlowAnswer[] {
    this.expire(now);
    const waiters = asks.map((a) => this.waiterOf(a));
    const order = asks.map((_, i) => i).sort((i, j) => compareWaiters(waiters[i]!, waiters[j]!, now) || i - j);
    const answers: FlowAnswer[] = new Array(asks.length);
    for (const i of order) answers[i] = this.answerOne(asks[i]!, waiters[i]!, now);
    return answers;
  }

  /** Restores a permit granted before a restart. */
  restore(executionId: string, lapseAt: number, holdMs: number): void {
    this.addPermit(executionId, { lapseAt, holdMs });
  }

  /** The permit an execution holds, if any. */
  permitOf(executionId: string): Permit | undefined {
    return this.inFlight.get(executionId);
  }

  /**
   * A delivery finished: its slot is free. `retryAfterMs` (a 429/503 Retry-After) holds the whole
   * key that long, at most maxWaitMs: one answer of a target must not park every execution of a
   * key for as long as it says (a year), and a shorter hold costs one probe per maxWaitMs.
   */
  release(executionId: string, now: number, retryAfterMs?: number): void {
    // a redelivered copy that was told to wait must not hold the key once the delivery ended
    this.forget(executionId);
    const permit = this.inFlight.get(executionId);
    if (permit !== undefined) {
      this.inFlight.delete(executionId);
      const startedAt = permit.lapseAt - permit.holdMs;
      // the first one measured replaces the guess (a guess of 200 ms for 1 ms deliveries held
      // every parallelism waiter back for several rounds of the average)
      if (now >= startedAt) this.measuredMs = this.measuredMs === null ? now - startedAt : 0.8 * this.measuredMs + 0.2 * (now - startedAt);
    }
    if (retryAfterMs !== undefined && retryAfterMs > 0) this.throttleUntil(now + retryAfterMs, now);
  }

  /** The key's target asked it to wait until `until` (at most maxWaitMs from now): nothing starts before. */
  throttleUntil(until: number, now: number): void {
    this.throttledUntil = Math.max(this.throttledUntil ?? 0, Math.min(until, now + this.maxWaitMs));
    // every waiter is now told to ask again when the slow-down ends: no slot stays promised
    this.dropSlots();
  }

  view(now: number): FlowView {
    this.expire(now);
    return {
      limits: this.limits,
      paused: this.paused,
      throttledUntil: this.throttledUntil,
      inFlight: this.inFlight.size,
      waiting: this.waiting.size,
      currentRate: this.started.length - countBelow(this.started, now - this.limits.periodMs, true),
      grantedTotal: this.grantedTotal,
      throttledTotal: this.throttledTotal,
    };
  }

  /** How much the gate holds now, each within FLOW_GATE_BOUNDS (reserved slots: at most one per waiter). */
  sizes(): { starts: number; permits: number; waiters: number; slots: number } {
    return { starts: this.started.length, permits: this.inFlight.size, waiters: this.waiting.size, slots: this.slots.length };
  }

  private answerOne(a: FlowAsk, waiter: Waiter, now: number): FlowAnswer {
    const wait = (retryAt: number): FlowAnswer => {
      const at = Math.min(Math.max(Math.ceil(retryAt), now + 1), now + this.maxWaitMs);
      waiter.forgetAt = at + WAITER_GRACE_MS;
      this.throttledTotal += 1;
      return { executionId: a.executionId, granted: false, retryAt: at };
    };
    if (this.inFlight.has(a.executionId)) {
      // asked again while holding a permit (a redelivered message): its slot is still taken
      return wait(now + this.durationMs);
    }
    if (this.paused) return wait(now + clamp(now - a.firstDueAt, PAUSED_RETRY_MS.min, PAUSED_RETRY_MS.max));
    if (this.throttledUntil !== null && this.throttledUntil > now) {
      waiter.heldBySlowDown = true;
      return wait(this.throttledUntil);
    }
    // a slow-down just ended: those it held (due again now) start first, in first-due order; one
    // due after them that asks before they come waits a moment, so a fresh execution that meets
    // the target's next 429 first cannot hold them back window after window (they are forgotten
    // WAITER_GRACE_MS after their time if they never come). A key with a rate orders them by its slots.
    if (this.limits.rate === null && !waiter.heldBySlowDown && this.heldAhead(waiter, now)) return wait(now + MIN_SLOT_WAIT_MS);
    // came back before its slot (told to ask again by maxWaitMs): it keeps it
    if (waiter.slotAt !== null && waiter.slotAt > now) return wait(waiter.slotAt);
    const { parallelism } = this.limits;
    const periodMs = this.windowMs;
    const rate = this.limits.rate === null ? null : Math.min(this.limits.rate, FLOW_GATE_BOUNDS.starts);
    if (parallelism !== null) {
      const ahead = this.waitersAhead(waiter, now);
      if (this.inFlight.size + ahead.forSlot >= parallelism) {
        const rounds = Math.floor((this.inFlight.size + ahead.inLine - parallelism) / parallelism) + 1;
        // rate-limited too: it takes a rate slot now and comes back then, not at a guess of when a
        // delivery ends, so a backlog comes back spread at the rate, once each; a slot that passed
        // while it waited is kept (it starts when it comes back if the window has room)
        if (rate !== null && waiter.slotAt === null)
          return wait(Math.max(now + MIN_SLOT_WAIT_MS, this.moveSlot(a.executionId, waiter, this.nextSlot(rate, periodMs, now))));
        return wait(now + Math.max(MIN_SLOT_WAIT_MS, Math.round(this.durationMs * rounds)));
      }
    }
    if (rate !== null) {
      if (waiter.slotAt !== null) {
        // at or after its slot the window alone decides (the slots after it were planned around
        // it). Full only if a start came late into it (this one's, or one before it): then the
        // next time a start leaves the window, ahead of the slots after it, so no room goes unused
        if (this.started.length >= rate)
          return wait(this.moveSlot(a.executionId, waiter, this.started[this.started.length - rate]! + periodMs));
      } else if (this.started.length + countBelow(this.slots, now + periodMs) >= rate) {
        // without a slot only the room left beyond every slot due within a period is free
        return wait(this.moveSlot(a.executionId, waiter, this.nextSlot(rate, periodMs, now)));
      }
    }
    this.forget(a.executionId);
    this.started.push(now);
    if (this.started.length > FLOW_GATE_BOUNDS.starts) this.started.splice(0, this.started.length - FLOW_GATE_BOUNDS.starts);
    this.addPermit(a.executionId, { lapseAt: now + a.holdMs, holdMs: a.holdMs });
    this.grantedTotal += 1;
    return { executionId: a.executionId, granted: true };
  }

  /**
   * The slot after every slot already given: about periodMs / rate after the last (whole
   * milliseconds: a waiter told a slot starts at it, not a fraction later), and no earlier than
   * the sliding window allows counting past starts and the slots (one whose time passed counted
   * as now, when it would start). The window, not the spacing, keeps the slots within the rate.
   */
  private nextSlot(rate: number, periodMs: number, now: number): number {
    const last = this.slots.at(-1);
    let at = Math.max(now + 1, last === undefined ? now + 1 : last + Math.floor(periodMs / rate));
    // the rate-th latest planned start must have left the window: future slots, then passed ones (as now), then past starts
    const future = this.slots.length - countBelow(this.slots, now, true);
    const passed = this.slots.length - future;
    let rateth: number | undefined;
    if (future >= rate) rateth = this.slots[this.slots.length - rate];
    else if (future + passed >= rate) rateth = now;
    else rateth = this.started[this.started.length - (rate - future - passed)];
    if (rateth !== undefined) at = Math.max(at, rateth + periodMs);
    return Math.ceil(at);
  }

  /** the window a key counts its starts over: its period plus RATE_START_SKEW_MS */
  private get windowMs(): number {
    return this.limits.periodMs + RATE_START_SKEW_MS;
  }

  /** how long a delivery is expected to hold its permit */
  private get durationMs(): number {
    return this.measuredMs ?? INITIAL_DURATION_MS;
  }

  /** Whether a waiter held by a slow-down, due before this one, is still expected. */
  private heldAhead(waiter: Waiter, now: number): boolean {
    for (const w of this.waiting.values()) if (w !== waiter && w.heldBySlowDown && compareWaiters(w, waiter, now) < 0) return true;
    return false;
  }

  /**
   * Waiters that come before this one for a parallelism slot, earlier due and still asking:
   * `forSlot`, those that keep a free slot from it: not one with a rate slot (its place is its
   * slot, and one that did not come back at it must not hold a free slot from those that did);
   * `inLine`, those it waits behind, for when to ask again: also those whose rate slot passed.
   */
  private waitersAhead(waiter: Waiter, now: number): { forSlot: number; inLine: number } {
    let forSlot = 0;
    let inLine = 0;
    for (const w of this.waiting.values()) {
      if (w === waiter || (w.slotAt !== null && w.slotAt > now) || compareWaiters(w, waiter, now) >= 0) continue;
      inLine += 1;
      if (w.slotAt === null) forSlot += 1;
    }
    return { forSlot, inLine };
  }

  /**
   * The asker's waiter, made if new (keeping a known waiter's place and its earliest due time);
   * past FLOW_GATE_BOUNDS.waiters a new one is answered without being remembered.
   */
  private waiterOf(a: FlowAsk): Waiter {
    const known = this.waiting.get(a.executionId);
    if (known) {
      known.firstDueAt = Math.min(known.firstDueAt, a.firstDueAt);
      known.priority = a.priority ?? PRIORITY.default; // a PATCH of the job's priority counts from its next ask
      known.forgetAt = Infinity; // asking now
      return known;
    }
    const waiter: Waiter = {
      executionId: a.executionId,
      firstDueAt: a.firstDueAt,
      priority: a.priority ?? PRIORITY.default,
      forgetAt: Infinity,
      slotAt: null,
      heldBySlowDown: false,
    };
    if (this.waiting.size < FLOW_GATE_BOUNDS.waiters) this.waiting.set(a.executionId, waiter);
    return waiter;
  }

  /** Gives a waiter a rate slot (in place of one it had) and returns its time; one not remembered is told it, but none is kept. */
  private moveSlot(executionId: string, waiter: Waiter, slotAt: number): number {
    if (waiter.slotAt !== null) removeSorted(this.slots, waiter.slotAt);
    waiter.slotAt = null;
    if (this.waiting.get(executionId) === waiter) {
      waiter.slotAt = slotAt;
      insertSorted(this.slots, slotAt);
    }
    return slotAt;
  }

  private forget(executionId: string): void {
    const waiter = this.waiting.get(executionId);
    if (waiter === undefined) return;
    if (waiter.slotAt !== null) removeSorted(this.slots, waiter.slotAt);
    this.waiting.delete(executionId);
  }

  /**
   * Voids every rate slot told; their waiters are given new ones when they come back. For a
   * limits change by the user: slots spaced for a higher rate would all come back into a full
   * window. (Jobs asking with other limits do not void them: a key whose jobs disagree would
   * lose its slots at every ask.)
   */
  dropSlots(): void {
    for (const w of this.waiting.values()) w.slotAt = null;
    this.slots = [];
  }

  private addPermit(executionId: string, permit: Permit): void {
    this.inFlight.delete(executionId);
    this.inFlight.set(executionId, permit);
    // the oldest first: Map keeps insertion order
    for (const id of this.inFlight.keys()) {
      if (this.inFlight.size <= FLOW_GATE_BOUNDS.permits) break;
      this.inFlight.delete(id);
    }
  }

  private expire(now: number): void {
    const periodMs = this.windowMs;
    let old = 0;
    while (old < this.started.length && this.started[old]! <= now - periodMs) old += 1;
    if (old > 0) this.started.splice(0, old);
    for (const [id, permit] of this.inFlight) if (permit.lapseAt <= now) this.inFlight.delete(id);
    for (const [id, w] of this.waiting) if (w.forgetAt <= now) this.forget(id);
    if (this.throttledUntil !== null && this.throttledUntil <= now) this.throttledUntil = null;
    // one given at construction from before the cap (or a larger one) holds at most maxWaitMs from the first look
    if (this.throttledUntil !== null) this.throttledUntil = Math.min(this.throttledUntil, now + this.maxWaitMs);
  }
}

/** Priority aged by the wait since the first due time, then first due time, then id (core/priority.ts). */
function compareWaiters(a: Waiter, b: Waiter, now: number): number {
  return (
    comparePriority({ priority: a.priority, dueAt: a.firstDueAt }, { priority: b.priority, dueAt: b.firstDueAt }, now) ||
    (a.executionId < b.executionId ? -1 : a.executionId > b.executionId ? 1 : 0)
  );
}

function clamp(value: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, value));
}

/** How many of an ascending array are below `value` (or at it too, if `orAt`). */
function countBelow(sorted: number[], value: number, orAt = false): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid]! < value || (orAt && sorted[mid] === value)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function insertSorted(sorted: number[], value: number): void {
  sorted.splice(countBelow(sorted, value, true), 0, value);
}

function removeSorted(sorted: number[], value: number): void {
  const at = countBelow(sorted, value);
  if (sorted[at] === value) sorted.splice(at, 1);
}
