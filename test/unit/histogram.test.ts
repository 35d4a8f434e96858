/** The fire-lag histogram: fixed bins so buckets sum across Durable Objects, quantiles by interpolation. */
import { describe, expect, it } from "vitest";
import { LAG_BOUNDS_MS, LAG_OVERFLOW, type LagHistogram, lagBin, quantileMs } from "../../src/core/histogram";

describe("lagBin", () => {
  it.each([
    [-250, 5], // clock skew: an early start lands in the first bin
    [0, 5],
    [5, 5], // bounds are inclusive upper bounds (Prometheus "le")
    [5.5, 10],
    [6, 10],
    [10, 10],
    [11, 25],
    [999, 1_000],
    [1_000, 1_000],
    [1_001, 2_000],
    [2_001, 5_000],
    [59_999, 60_000],
    [60_000, 60_000],
    [60_001, LAG_OVERFLOW],
    [3_600_000, LAG_OVERFLOW],
  ])("lag %d ms -> bin %i", (lagMs, bin) => {
    expect(lagBin(lagMs)).toBe(bin);
  });

  it("bounds are strictly increasing and the overflow marker is not one of them", () => {
    for (let i = 1; i < LAG_BOUNDS_MS.length; i++) expect(LAG_BOUNDS_MS[i]!).toBeGreaterThan(LAG_BOUNDS_MS[i - 1]!);
    expect(LAG_BOUNDS_MS as readonly number[]).not.toContain(LAG_OVERFLOW);
  });

  it("every bin returned is a bound or the overflow", () => {
    const valid = new Set<number>([...LAG_BOUNDS_MS, LAG_OVERFLOW]);
    for (let lag = -10; lag < 70_000; lag += 37) expect(valid.has(lagBin(lag))).toBe(true);
  });
});

const hist = (entries: [number, number][]): LagHistogram => new Map(entries);

describe("quantileMs", () => {
  it.each<[string, [number, number][], number, number | null]>([
    ["empty -> null", [], 0.5, null],
    [
      "all-zero counts -> null",
      [
        [5, 0],
        [10, 0],
      ],
      0.5,
      null,
    ],
    ["one bin [0,5]: p50 interpolates to 2.5 -> 3", [[5, 100]], 0.5, 3],
    ["one bin [0,5]: p99", [[5, 100]], 0.99, 5],
    ["one bin (5,10]: p50 = 7.5 -> 8", [[10, 100]], 0.5, 8],
    ["one bin (500,1000]: p10", [[1_000, 10]], 0.1, 550],
    [
      "two bins: p50 at the top of the first",
      [
        [5, 50],
        [100, 50],
      ],
      0.5,
      5,
    ],
    [
      "two bins: p95 inside the second (50,100]",
      [
        [5, 50],
        [100, 50],
      ],
      0.95,
      95,
    ],
    [
      "two bins: p99",
      [
        [5, 50],
        [100, 50],
      ],
      0.99,
      99,
    ],
    [
      "q=1 is the top of the last non-empty bin",
      [
        [25, 3],
        [250, 1],
      ],
      1,
      250,
    ],
    ["q=0 is the bottom of the first non-empty bin", [[100, 10]], 0, 50],
    ["overflow only: reports its lower bound", [[LAG_OVERFLOW, 10]], 0.5, 60_000],
    [
      "p95 in the overflow",
      [
        [5, 90],
        [LAG_OVERFLOW, 10],
      ],
      0.95,
      60_000,
    ],
    [
      "p50 below the overflow",
      [
        [5, 90],
        [LAG_OVERFLOW, 10],
      ],
      0.5,
      3,
    ],
  ])("%s", (_name, entries, q, expected) => {
    expect(quantileMs(hist(entries), q)).toBe(expected);
  });

  it("is monotonic in q", () => {
    const h = hist([
      [5, 40],
      [25, 30],
      [250, 20],
      [2_000, 9],
      [LAG_OVERFLOW, 1],
    ]);
    let previous = -Infinity;
    for (let q = 0; q <= 1.0001; q += 0.01) {
      const v = quantileMs(h, Math.min(q, 1))!;
      expect(v).toBeGreaterThanOrEqual(previous);
      previous = v;
    }
  });
});
