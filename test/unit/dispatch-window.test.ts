/**
 * The dispatch window (src/core/dispatch-window.ts) and the tenants' turns (TenantDueQueues in
 * src/bucket/due-queue.ts): together they keep one tenant's backlog in its bucket, where another
 * tenant's due job takes the next free slot, instead of in the first-in-first-out queue.
 */
import { describe, expect, it } from "vitest";
import { TenantDueQueues } from "../../src/bucket/due-queue";
import { DispatchWindow } from "../../src/core/dispatch-window";

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
