/** The fire-lag histogram: fixed upper bounds (ms) so buckets can be summed across Durable Objects. */
export const LAG_BOUNDS_MS = [5, 10, 25, 50, 100, 250, 500, 1000, 2000, 5000, 10000, 30000, 60000] as const;
/** The overflow bin's bound, stored as an integer for SQL. */
export const LAG_OVERFLOW = -1;

export function lagBin(lagMs: number): number {
  for (const bound of LAG_BOUNDS_MS) if (lagMs <= bound) return bound;
  return LAG_OVERFLOW;
}

export type LagHistogram = Map<number, number>;

/** Quantile estimated by linear interpolation inside the bin; the overflow bin reports its lower bound. */
export function quantileMs(histogram: LagHistogram, q: number): number | null {
  const total = [...histogram.values()].reduce((a, b) => a + b, 0);
  if (total === 0) return null;
  const rank = q * total;
  let seen = 0;
  let lower = 0;
  for (const bound of LAG_BOUNDS_MS) {
    const count = histogram.get(bound) ?? 0;
    if (count > 0 && seen + count >= rank) return Math.round(lower + ((rank - seen) / count) * (bound - lower));
    seen += count;
    lower = bound;
  }
  return lower;
}
