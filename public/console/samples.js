// The live view's data: GET /v1/metrics holds totals since each bucket started, so a point on the
// chart is the difference of two reads: attempts started per second, and the fire-lag
// percentiles of the attempts started between them (from the histogram's bucket deltas, with the
// interpolation src/core/histogram.ts quantileMs uses). No DOM here: test/unit/console-samples.test.ts.

/**
 * @typedef {{ counters: Record<string, number>, dead_total_by_reason: Record<string, number>,
 *   fire_lag_ms: { count: number, buckets: { le: string, count: number }[] } }} Metrics
 * @typedef {{ at: number, metrics: Metrics }} Read
 * @typedef {{ at: number, seconds: number, started: number, startedPerSecond: number,
 *   succeededPerSecond: number, p50: number | null, p95: number | null, p99: number | null }} Sample
 */

/**
 * Per-bucket counts of the attempts started between two reads, in bound order; null when a total
 * went down (the stack restarted: that interval cannot be known).
 * @param {Metrics} before
 * @param {Metrics} after
 * @returns {{ le: number, count: number }[] | null}
 */
export function lagDelta(before, after) {
  const previous = new Map(before.fire_lag_ms.buckets.map((b) => [b.le, b.count]));
  const bins = [];
  for (const b of after.fire_lag_ms.buckets) {
    const count = b.count - (previous.get(b.le) ?? 0);
    if (count < 0) return null;
    bins.push({ le: b.le === "+Inf" ? Number.POSITIVE_INFINITY : Number(b.le), count });
  }
  return bins.sort((a, b) => a.le - b.le);
}

/**
 * The q-quantile (0..1) of binned lags: linear inside its bin; the overflow bin reports its lower
 * bound, as the API's own percentiles do. Null without attempts.
 * @param {{ le: number, count: number }[]} bins
 * @param {number} q
 */
export function quantile(bins, q) {
  const total = bins.reduce((sum, b) => sum + b.count, 0);
  if (total === 0) return null;
  const rank = q * total;
  let seen = 0;
  let lower = 0;
  for (const bin of bins) {
    if (!Number.isFinite(bin.le)) return lower;
    if (bin.count > 0 && seen + bin.count >= rank) return Math.round(lower + ((rank - seen) / bin.count) * (bin.le - lower));
    seen += bin.count;
    lower = bin.le;
  }
  return lower;
}

/**
 * A chart point from two reads, or null when the interval is empty or the totals were reset.
 * @param {Read} before
 * @param {Read} after
 * @returns {Sample | null}
 */
export function sampleBetween(before, after) {
  const seconds = (after.at - before.at) / 1000;
  const bins = lagDelta(before.metrics, after.metrics);
  const counter = (/** @type {string} */ name) => (after.metrics.counters[name] ?? 0) - (before.metrics.counters[name] ?? 0);
  const succeeded = counter("succeeded_total");
  if (seconds <= 0 || bins === null || succeeded < 0) return null;
  const started = bins.reduce((sum, b) => sum + b.count, 0);
  return {
    at: after.at,
    seconds,
    started,
    startedPerSecond: started / seconds,
    succeededPerSecond: succeeded / seconds,
    p50: quantile(bins, 0.5),
    p95: quantile(bins, 0.95),
    p99: quantile(bins, 0.99),
  };
}
