/**
 * The bucket's next alarm (STYLE.md habit 4): the earliest of due, lease deadline, dispatch deadline
 * and mirror flush; overdue rows fire at once; quantized so one firing sends a full batch.
 */
import { describe, expect, it } from "vitest";
import { nextAlarmAt } from "../../src/core/alarm";

const now = 1_700_000_000_000; // a multiple of 50

describe("nextAlarmAt", () => {
  it.each<[string, ReadonlyArray<number | null | undefined>, number, number | null]>([
    ["nothing pending", [], 50, null],
    ["only nulls and undefined", [null, undefined, null], 50, null],
    ["one due time on the quantum", [now + 1_000], 50, now + 1_000],
    ["the earliest candidate wins", [now + 5_000, now + 1_000, now + 3_000], 50, now + 1_000],
    ["nulls are skipped, not read as 0", [null, now + 2_000, undefined], 50, now + 2_000],
    ["rounds up to the quantum", [now + 1_001], 50, now + 1_050],
    ["rounds up, never down", [now + 1_049], 50, now + 1_050],
    ["the earliest is picked before rounding", [now + 1_051, now + 1_001], 50, now + 1_050],
    ["an overdue candidate fires now (after a restart)", [now - 60_000, now + 5_000], 50, now],
    ["an overdue candidate fires now, rounded to the quantum", [now - 1], 1_000, now],
    ["quantum 1 keeps the exact time", [now + 1_234], 1, now + 1_234],
    ["quantum 0 keeps the exact time", [now + 1_234], 0, now + 1_234],
    ["a candidate at 0 counts (not confused with null)", [0], 50, now],
  ])("%s", (_name, candidates, quantumMs, expected) => {
    expect(nextAlarmAt({ candidates, now, quantumMs })).toBe(expected);
  });

  it("never returns a time before now, and never more than one quantum after the earliest candidate", () => {
    for (const offsetNow of [0, 1, 17, 49]) {
      const n = now + offsetNow; // now off the quantum grid
      for (const delta of [-10_000, -1, 0, 1, 49, 50, 51, 999]) {
        const at = nextAlarmAt({ candidates: [n + delta, n + 100_000], now: n, quantumMs: 50 })!;
        expect(at).toBeGreaterThanOrEqual(n);
        expect(at).toBeGreaterThanOrEqual(n + delta);
        expect(at % 50).toBe(0);
        expect(at - Math.max(n, n + delta)).toBeLessThan(50);
      }
    }
  });
});
