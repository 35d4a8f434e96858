/**
 * The console's live view (public/console/samples.js): a chart point is the difference of two
 * GET /v1/metrics reads. Its percentiles must be the API's own estimate (src/core/histogram.ts
 * quantileMs) over the attempts between the reads, and a restarted stack must not draw a
 * negative rate.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { lagDelta, quantile, sampleBetween } from "../../public/console/samples.js";
import { LAG_BOUNDS_MS, LAG_OVERFLOW, quantileMs } from "../../src/core/histogram";

const LES = [...LAG_BOUNDS_MS.map(String), "+Inf"];

function metrics(counts: number[], counters: Record<string, number> = {}) {
  return {
    counters,
    dead_total_by_reason: {},
    fire_lag_ms: { count: counts.reduce((a, b) => a + b, 0), buckets: LES.map((le, i) => ({ le, count: counts[i] ?? 0 })) },
  };
}

describe("console live samples", () => {
  it("counts the attempts of each lag bucket between two reads", () => {
    const before = metrics([1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    const after = metrics([1, 5, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    expect(lagDelta(before, after)?.slice(0, 3)).toEqual([
      { le: 5, count: 0 },
      { le: 10, count: 3 },
      { le: 25, count: 3 },
    ]);
    expect(lagDelta(before, after)?.at(-1)).toEqual({ le: Number.POSITIVE_INFINITY, count: 1 });
  });

  it("estimates percentiles exactly as the API does (src/core/histogram.ts quantileMs)", () => {
    fc.assert(
      fc.property(
        fc.array(fc.nat(50), { minLength: LES.length, maxLength: LES.length }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (counts, q) => {
          const bins = lagDelta(metrics([]), metrics(counts))!;
          const histogram = new Map([...LAG_BOUNDS_MS, LAG_OVERFLOW].map((le, i) => [le, counts[i]!]));
          expect(quantile(bins, q)).toBe(quantileMs(histogram, q));
        },
      ),
    );
  });

  it("makes a point of rates per second and the interval's percentiles", () => {
    const before = { at: 10_000, metrics: metrics([0, 0, 0, 0, 0], { succeeded_total: 10 }) };
    const after = { at: 12_000, metrics: metrics([0, 0, 0, 4, 0], { succeeded_total: 14 }) };
    expect(sampleBetween(before, after)).toEqual({
      at: 12_000,
      seconds: 2,
      started: 4,
      startedPerSecond: 2,
      succeededPerSecond: 2,
      p50: 38, // 25 + (2/4) × (50 − 25), rounded
      p95: 49,
      p99: 50,
    });
  });

  it("draws no lag where no attempt started, and no point across a restart (totals went down)", () => {
    const quiet = sampleBetween({ at: 0, metrics: metrics([3]) }, { at: 2_000, metrics: metrics([3]) });
    expect(quiet).toMatchObject({ started: 0, startedPerSecond: 0, p50: null, p99: null });
    expect(sampleBetween({ at: 0, metrics: metrics([3]) }, { at: 2_000, metrics: metrics([1]) })).toBeNull();
    expect(
      sampleBetween({ at: 0, metrics: metrics([], { succeeded_total: 5 }) }, { at: 2_000, metrics: metrics([], { succeeded_total: 0 }) }),
    ).toBeNull();
  });
});
