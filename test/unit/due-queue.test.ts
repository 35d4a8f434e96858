/**
 * The bucket's due-time heap (src/bucket/due-queue.ts): the alarm takes scheduled executions in
 * due order from memory; stale entries (a row moved or left) are skipped, never returned.
 */
import { describe, expect, it } from "vitest";
import { DueQueue } from "../../src/bucket/due-queue";
import { mulberry32 } from "./prng";

describe("DueQueue", () => {
  it("pops 10,000 random entries in due order", () => {
    const rand = mulberry32(7);
    const q = new DueQueue();
    const dues = Array.from({ length: 10_000 }, () => Math.floor(rand() * 1_000_000));
    for (const [i, d] of dues.entries()) q.push(d, `e${i}`);
    const out: number[] = [];
    for (let e = q.pop(); e; e = q.pop()) out.push(e.dueAt);
    expect(out).toEqual([...dues].sort((a, b) => a - b));
  });

  it("peek skips and drops entries that are no longer live", () => {
    const q = new DueQueue();
    q.push(10, "a");
    q.push(20, "b");
    q.push(30, "c");
    const live = new Map([
      ["b", 20],
      ["c", 30],
    ]); // "a" moved away
    expect(q.peek((dueAt, id) => live.get(id) === dueAt)).toEqual({ dueAt: 20, id: "b" });
    expect(q.size).toBe(2);
    live.set("b", 25); // "b" was rescheduled: its old entry is stale
    q.push(25, "b");
    expect(q.peek((dueAt, id) => live.get(id) === dueAt)).toEqual({ dueAt: 25, id: "b" });
  });

  it("is empty when every entry is stale", () => {
    const q = new DueQueue();
    q.push(1, "x");
    expect(q.peek(() => false)).toBeUndefined();
    expect(q.size).toBe(0);
    expect(q.pop()).toBeUndefined();
  });
});
