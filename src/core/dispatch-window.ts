/**
 * How many fire messages a bucket keeps sent but not yet claimed (issue 13, fairness). The fire
 * queue is first in, first out: whatever a bucket sends waits behind everything sent before it,
 * so a bucket that sent a 100,000-job backlog at once would make every later job, of any tenant,
 * wait for that backlog. Instead the backlog waits in the bucket, where the next free slot can go
 * to another tenant (TenantDueQueues), and the queue holds only about `targetQueueMs` of work.
 *
 * The size follows the queue's own delay, measured on every claim (send to claim), as LEDBAT and
 * TCP Vegas do: the delay above the lowest one seen lately is queueing; below the target a claim
 * adds a slot (the window doubles per round trip while the queue keeps up), above it the window
 * shrinks by a quarter, at most once per round trip. It needs no knowledge of how fast the
 * consumers are: on the local runtime it settles at a few messages, on Cloudflare at hundreds.
 *
 * Jitter is not queueing (issue 35, item 7). Production's queue takes tens of milliseconds with a
 * long tail (core/queue-delay.ts), so most messages arrive well above the lowest delay even when
 * nothing waits, and a fixed 30 ms held the window at its floor (a bucket near 27 executions/s).
 * A claim is late only past the target plus 1.5 times the queue's jitter, measured as the median
 * difference between the delays of successive sends (each send counted once, by its first claim:
 * its other claims carry the same send time, and often its delay, and would make the median step
 * zero). Jitter moves single messages, queueing moves them all: a steady or growing queue barely
 * changes the delay from one send to the next, so a backlog still waits in the bucket, and the
 * queue holds about the target plus its own jitter of waiting (test/unit/dispatch-window.test.ts
 * measures both; without jitter a saturated queue now waits about 75 ms where it waited 45).
 */
export interface DispatchWindowOptions {
  initial: number;
  min: number;
  max: number;
  /** the queueing delay (above the base delay) the window aims at */
  targetQueueMs: number;
}

/** the base delay is the lowest of the current and the previous period of this length */
const BASE_PERIOD_MS = 30_000;
const SHRINK = 0.75;
/** the jitter is taken from this many recent sends (about 1.5 s at one send per 50 ms alarm) */
const JITTER_SENDS = 32;
/**
 * how much jitter a claim may carry on top of the target: 1.5 times the median successive
 * difference, about the interquartile range of independent delays (for a normal, 0.95σ × 1.5 ≈
 * 1.35σ); smaller lets jitter close the window again, larger holds more real queueing
 */
const JITTER_ALLOWANCE = 1.5;

export class DispatchWindow {
  private slots: number;
  private baseNow = Number.POSITIVE_INFINITY;
  private basePrevious = Number.POSITIVE_INFINITY;
  private basePeriodEndsAt: number | null = null;
  private shrunkAt = Number.NEGATIVE_INFINITY;
  /** recent sends, oldest first: when each was sent and the delay of its first claim */
  private readonly sends: { sentAt: number; delayMs: number }[] = [];
  /** the queueing delay (above the base) of the latest claim */
  lastQueueingMs = 0;
  /** the queue's jitter: the median difference between the delays of successive sends */
  jitterMs = 0;

  constructor(private readonly options: DispatchWindowOptions) {
    this.slots = clamp(options.initial, options.min, options.max);
  }

  /** messages that may be sent but unclaimed at once */
  get size(): number {
    return Math.floor(this.slots);
  }

  /** A claim took a message sent `delayMs` ago. */
  onClaimed(delayMs: number, now: number): void {
    if (this.basePeriodEndsAt === null || now >= this.basePeriodEndsAt) {
      this.basePrevious = this.basePeriodEndsAt === null ? Number.POSITIVE_INFINITY : this.baseNow;
      this.baseNow = Number.POSITIVE_INFINITY;
      this.basePeriodEndsAt = now + BASE_PERIOD_MS;
    }
    this.baseNow = Math.min(this.baseNow, delayMs);
    const base = Math.min(this.baseNow, this.basePrevious);
    this.noteSend(now - delayMs, delayMs);
    const queueing = delayMs - base;
    this.lastQueueingMs = queueing;
    const { min, max, targetQueueMs } = this.options;
    if (queueing <= targetQueueMs + JITTER_ALLOWANCE * this.jitterMs) {
      this.slots = clamp(this.slots + 1, min, max);
    } else if (now - this.shrunkAt >= Math.max(delayMs, targetQueueMs)) {
      // once per round trip: the claims of one queue-full all tell the same news
      this.slots = clamp(this.slots * SHRINK, min, max);
      this.shrunkAt = now;
    }
  }

  /** The first claim of a send (all of a send's executions carry its time) measures the jitter anew. */
  private noteSend(sentAt: number, delayMs: number): void {
    if (this.sends.some((s) => s.sentAt === sentAt)) return;
    this.sends.push({ sentAt, delayMs });
    if (this.sends.length > JITTER_SENDS) this.sends.shift();
    const steps = this.sends
      .slice(1)
      .map((s, i) => Math.abs(s.delayMs - this.sends[i]!.delayMs))
      .sort((a, b) => a - b);
    // the lower median: one odd step among few is no jitter yet
    this.jitterMs = steps.length < 2 ? 0 : steps[Math.floor((steps.length - 1) / 2)]!;
  }

  /**
   * Messages that may be sent now, with `unclaimed` already out. Zero until a quarter of the
   * window is free, so one send (and one alarm) carries several messages instead of one per claim.
   */
  room(unclaimed: number): number {
    const free = this.size - unclaimed;
    return free >= Math.max(1, Math.ceil(this.size / 4)) ? free : 0;
  }
}

function clamp(value: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, value));
}
