/**
 * The dispatch window (src/core/dispatch-window.ts) and the tenants' turns (TenantDueQueues in
 * src/bucket/due-queue.ts): together they keep one tenant's backlog in its bucket, where another
 * tenant's due job takes the next free slot, instead of in the first-in-first-out queue.
 */
import { describe, expect, it } from "vitest";
import { TenantDueQueues } from "../../src/bucket/due-queue";
import { DispatchWindow } from "../../src/core/dispatch-window";
import { drawDelayMs, type QueueDelay } from "../../src/core/queue-delay";
import { mulberry32 } from "./prng";

const options = { initial: 8, min: 2, max: 2000, targetQueueMs: 100 };
const always = () => true;

describe("DispatchWindow", () => {
  it("grows by a slot per timely claim: it doubles per round trip while the queue keeps up", () => {
    const w = new DispatchWindow(options);
    for (let i = 0; i < 8; i++) w.onClaimed(20, 1_000 + i);
    expect(w.size).toBe(16);
    for (let i = 0; i < 16; i++) w.onClaimed(25, 2_000 + i);
    expect(w.size).toBe(32);
  });

  it("shrinks by a quarter when claims come later than the target above the base delay, once per round trip", () => {
    const w = new DispatchWindow({ ...options, initial: 400 });
    w.onClaimed(20, 0); // the base delay: 20 ms
    const grown = w.size;
    // a queue-full of late claims within one round trip (500 ms) shrinks it once
    for (let i = 0; i < 50; i++) w.onClaimed(520, 1_000 + i);
    expect(w.size).toBe(Math.floor(grown * 0.75));
    // a round trip later, again
    w.onClaimed(520, 1_600);
    expect(w.size).toBe(Math.floor(Math.floor(grown * 0.75 * 0.75 * 100) / 100));
  });

  it("measures queueing above the lowest delay seen lately, so a slow but empty queue still grows the window", () => {
    const w = new DispatchWindow(options);
    // every claim takes 300 ms (a far queue), none waits behind others: no queueing
    for (let i = 0; i < 100; i++) w.onClaimed(300 + (i % 3), i * 10);
    expect(w.lastQueueingMs).toBeLessThanOrEqual(2);
    expect(w.size).toBe(108);
  });

  it("forgets a base delay older than two periods (the path got slower for good)", () => {
    const w = new DispatchWindow(options);
    w.onClaimed(10, 0);
    w.onClaimed(400, 31_000); // the next period: the 10 ms of the previous one still counts
    expect(w.lastQueueingMs).toBe(390);
    w.onClaimed(400, 62_000); // two periods on: the base is 400 now
    expect(w.lastQueueingMs).toBe(0);
  });

  it("stays within min and max", () => {
    const w = new DispatchWindow({ ...options, initial: 3, max: 10 });
    for (let i = 0; i < 100; i++) w.onClaimed(0, i);
    expect(w.size).toBe(10);
    w.onClaimed(0, 0);
    for (let t = 1_000; t < 30_000; t += 1_000) w.onClaimed(5_000, t);
    expect(w.size).toBe(2);
  });

  it("has room only once a quarter of the window is free: one send carries several messages", () => {
    const w = new DispatchWindow({ ...options, initial: 16 });
    expect(w.room(0)).toBe(16);
    expect(w.room(12)).toBe(4);
    expect(w.room(13)).toBe(0);
    expect(w.room(16)).toBe(0);
    expect(w.room(40)).toBe(0);
  });
});

/**
 * One bucket with an endless backlog, a millisecond at a time: an alarm every ALARM_QUANTUM_MS sends
 * what the window has room for, in messages of FIRE_GROUP_SIZE executions, each reaching the
 * consumers after a draw of `delay` (one per message, or one per send call as the local emulation
 * draws, src/platform/queue-latency.ts); the consumers claim what reached them at once, or, with
 * `consumerPerSec`, first in first out at that rate (a queue that really backs up). Figures are
 * over the second half, once the window has settled.
 */
function simulate({
  delay,
  seed,
  perCall = false,
  consumerPerSec,
}: {
  delay: QueueDelay;
  seed: number;
  perCall?: boolean;
  consumerPerSec?: number;
}) {
  const SECONDS = 30;
  const ALARM_QUANTUM_MS = 50;
  const FIRE_GROUP_SIZE = 6;
  // the bucket's own options (src/bucket/state.ts) and the default target (src/config.ts)
  const w = new DispatchWindow({ initial: 16, min: 4, max: 2000, targetQueueMs: 30 });
  const rand = mulberry32(seed);
  /** messages on their way, and those that reached the consumers (in order of arrival) */
  const inFlight: { sentAt: number; arrivesAt: number; n: number }[] = [];
  const arrived: { sentAt: number; arrivedAt: number; n: number }[] = [];
  let unclaimed = 0;
  let credit = 0;
  let claimed = 0;
  const sizes: number[] = [];
  const waits: number[] = [];
  const settledAt = (SECONDS * 1000) / 2;
  for (let t = 0; t < SECONDS * 1000; t++) {
    const landed = inFlight.filter((m) => m.arrivesAt <= t);
    if (landed.length > 0) {
      inFlight.splice(0, inFlight.length, ...inFlight.filter((m) => m.arrivesAt > t));
      for (const m of landed.sort((a, b) => a.arrivesAt - b.arrivesAt)) arrived.push({ sentAt: m.sentAt, arrivedAt: m.arrivesAt, n: m.n });
    }
    credit = consumerPerSec === undefined ? Number.POSITIVE_INFINITY : Math.min(credit + consumerPerSec / 1000, FIRE_GROUP_SIZE);
    while (arrived.length > 0 && credit >= arrived[0]!.n) {
      const m = arrived.shift()!;
      credit -= m.n;
      unclaimed -= m.n;
      for (let k = 0; k < m.n; k++) w.onClaimed(t - m.sentAt, t);
      if (t >= settledAt) {
        claimed += m.n;
        waits.push(t - m.arrivedAt);
      }
    }
    if (t % ALARM_QUANTUM_MS === 0) {
      let room = w.room(unclaimed);
      const callDelay = drawDelayMs(delay, rand);
      while (room > 0) {
        const n = Math.min(room, FIRE_GROUP_SIZE);
        inFlight.push({ sentAt: t, arrivesAt: t + (perCall ? callDelay : drawDelayMs(delay, rand)), n });
        unclaimed += n;
        room -= n;
      }
      if (t >= settledAt) sizes.push(w.size);
    }
  }
  const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
  return {
    perSec: claimed / (SECONDS - settledAt / 1000),
    medianSize: sorted(sizes)[Math.floor(sizes.length / 2)] ?? 0,
    /** how long a claimed message waited for a consumer once it reached the queue: real queueing */
    medianWaitMs: sorted(waits)[Math.floor(waits.length / 2)] ?? 0,
  };
}

/** production's per-bucket rate at the design's 10,000 executions/s over 32 buckets (docs/capacity.md §3) */
const BUCKET_RATE = 312;

describe("DispatchWindow under production's queue jitter (issue 35, item 7)", () => {
  // medians of 30-60 ms (Cloudflare gives ~60 ms to send) and tails of a few hundred ms
  it.each([
    { medianMs: 30, p99Ms: 300, perCall: false, seed: 1 },
    { medianMs: 60, p99Ms: 400, perCall: false, seed: 2 },
    { medianMs: 45, p99Ms: 600, perCall: false, seed: 3 },
    { medianMs: 40, p99Ms: 400, perCall: true, seed: 4 },
    { medianMs: 60, p99Ms: 400, perCall: true, seed: 5 },
  ])(
    "jitter alone (median $medianMs ms, p99 $p99Ms ms, a draw per call: $perCall) is not queueing: the window stays open past what 312 executions/s need",
    ({ seed, perCall, ...delay }) => {
      const r = simulate({ delay, seed, perCall });
      // the window BUCKET_RATE needs: that rate times a message's round trip (its mean delay, under
      // 1.5 x the median for these tails, plus the alarm quantum it may wait for)
      const needed = Math.ceil((BUCKET_RATE * (1.5 * delay.medianMs + 50)) / 1000);
      expect(r.medianSize).toBeGreaterThanOrEqual(needed);
      expect(r.perSec).toBeGreaterThanOrEqual(BUCKET_RATE);
    },
  );

  it.each([
    { medianMs: 60, p99Ms: 400, perCall: false, seed: 6 },
    { medianMs: 60, p99Ms: 400, perCall: true, seed: 7 },
    { medianMs: 20, p99Ms: 20, perCall: false, seed: 8 },
  ])(
    "a queue that really backs up (median $medianMs ms, p99 $p99Ms ms, a draw per call: $perCall) still keeps the backlog in the bucket, and keeps up with the consumers",
    ({ seed, perCall, ...delay }) => {
      // consumers take 500 executions/s: a window above their pace only lengthens the queue, where
      // another tenant's job would wait behind it; the window keeps that wait within a few targets
      // (the target plus the queue's own jitter), not the whole backlog's, at the consumers' pace
      const r = simulate({ delay, seed, perCall, consumerPerSec: 500 });
      expect(r.medianWaitMs).toBeLessThanOrEqual(4 * 30);
      expect(r.perSec).toBeGreaterThanOrEqual(0.8 * 500);
    },
  );
});

describe("TenantDueQueues", () => {
  it("serves tenants in turns: a later job of a small tenant goes before a big tenant's earlier backlog", () => {
    const q = new TenantDueQueues();
    for (let i = 0; i < 1000; i++) q.push(100 + i, `big-${i}`, "big");
    q.push(5_000, "small-0", "small");
    const taken = q.takeDue(10_000, 4, always).map((e) => e.id);
    expect(taken).toHaveLength(4);
    expect(taken).toContain("small-0");
    // within a tenant, due order
    expect(taken.filter((id) => id.startsWith("big"))).toEqual(["big-0", "big-1", "big-2"]);
  });

  it("takes only what is due, and all of it when there is room", () => {
    const q = new TenantDueQueues();
    q.push(10, "a1", "a");
    q.push(20, "b1", "b");
    q.push(30, "a2", "a");
    q.push(99, "b2", "b");
    expect(
      q
        .takeDue(30, 10, always)
        .map((e) => e.id)
        .sort(),
    ).toEqual(["a1", "a2", "b1"]);
    expect(q.peek(always)).toEqual({ dueAt: 99, id: "b2" });
  });

  it("rotates who goes first across takes, so a take of one slot does not always favour the same tenant", () => {
    const q = new TenantDueQueues();
    for (let i = 0; i < 10; i++) {
      q.push(i, `a${i}`, "a");
      q.push(i, `b${i}`, "b");
      q.push(i, `c${i}`, "c");
    }
    const firsts = Array.from({ length: 6 }, () => q.takeDue(100, 1, always)[0]!.id[0]);
    expect(firsts).toEqual(["a", "b", "c", "a", "b", "c"]);
  });

  it("skips stale entries (moved or gone) and peeks the earliest live one of any tenant", () => {
    const q = new TenantDueQueues();
    q.push(10, "x", "a");
    q.push(20, "y", "b");
    q.push(30, "z", "a");
    const live = (_dueAt: number, id: string) => id !== "x";
    expect(q.peek(live)).toEqual({ dueAt: 20, id: "y" });
    expect(q.takeDue(100, 10, live).map((e) => e.id)).toEqual(["z", "y"]);
    expect(q.peek(live)).toBeUndefined();
  });
});
