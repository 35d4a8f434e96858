/**
 * The gate of one flow-control key (core/flow.ts: its limits, asks, answers and bounds). Pure:
 * time comes in as `now`; the FlowKey Durable Object owns one gate per tenant and key.
 *
 * Over the limit an execution waits: the gate answers when to ask again (never later than
 * maxWaitMs). Over the rate a waiter is given a slot, a time the sliding window will have room
 * for it, and starts when it comes back then: a slot once told is not given to anyone else.
 * Otherwise waiters are served by priority, aged by their wait since their first due time
 * (core/priority.ts: with one priority, in order of first due time). A waiter that stops asking
 * (its consumer died, its job was canceled) is forgotten, with its slot, after its retry time
 * plus WAITER_GRACE_MS. Every collection the gate keeps is bounded (FLOW_GATE_BOUNDS).
 */
import {
  FLOW_GATE_BOUNDS,
  type FlowAnswer,
  type FlowAsk,
  type FlowLimits,
  type FlowView,
  PAUSED_RETRY_MS,
  type Permit,
  RATE_START_SKEW_MS,
  WAITER_GRACE_MS,
} from "./flow";
import { comparePriority, PRIORITY } from "./priority";
import { countBelow, insertSorted, removeSorted } from "./sorted-times";

/** a wait for a parallelism slot is at least this long (a poll never spins) */
const MIN_SLOT_WAIT_MS = 50;
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
