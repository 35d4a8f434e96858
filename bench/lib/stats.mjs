// Small statistics helpers; every figure is computed from raw samples in the bench process.

/** Nearest-rank percentile (p in 0..100) of an ascending-sorted array; null when empty. */
export function percentileSorted(sorted, p) {
  if (sorted.length === 0) return null;
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(sorted.length, rank) - 1];
}

/** p50/p95/p99/max/min/mean of numbers (ms), rounded to 0.1 ms. */
export function summary(values) {
  const sorted = Float64Array.from(values).sort();
  const r = (x) => (x === null ? null : Math.round(x * 10) / 10);
  let sum = 0;
  for (const v of sorted) sum += v;
  return {
    count: sorted.length,
    min: r(sorted.length ? sorted[0] : null),
    p50: r(percentileSorted(sorted, 50)),
    p95: r(percentileSorted(sorted, 95)),
    p99: r(percentileSorted(sorted, 99)),
    max: r(sorted.length ? sorted[sorted.length - 1] : null),
    mean: r(sorted.length ? sum / sorted.length : null),
  };
}

/** Counts of `times` per `widthMs` slot from `from` (slot 0 = [from, from + width)). */
export function perSlot(times, from, widthMs = 1000) {
  const counts = [];
  for (const t of times) {
    const slot = Math.floor((t - from) / widthMs);
    if (slot < 0) continue;
    while (counts.length <= slot) counts.push(0);
    counts[slot] += 1;
  }
  return counts;
}

export function round(x, digits = 1) {
  if (x === null || x === undefined || !Number.isFinite(x)) return x ?? null;
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/** Fisher-Yates shuffle in place with a seeded PRNG (mulberry32), so runs are comparable. */
export function shuffle(array, seed = 42) {
  let a = seed >>> 0;
  const rand = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  for (let i = array.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [array[i], array[j]] = [array[j], array[i]];
  }
  return array;
}

export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls `check` every `intervalMs` until it returns true or `deadlineAt` (epoch ms) passes; returns whether it held. */
export async function waitUntil(check, deadlineAt, intervalMs = 100) {
  for (;;) {
    if (await check()) return true;
    if (Date.now() >= deadlineAt) return false;
    await sleep(Math.min(intervalMs, Math.max(1, deadlineAt - Date.now())));
  }
}

/**
 * Runtime CPU milliseconds per delivered execution, from cpu() seconds by process name: workerd
 * (the one thread that runs the API, the buckets, the queue and the consumer) and the whole stack.
 */
export function cpuMsPerDelivery(cpuByComm, delivered) {
  if (!delivered) return null;
  const all = Object.values(cpuByComm).reduce((a, b) => a + b, 0);
  const workerd = Object.entries(cpuByComm)
    .filter(([comm]) => comm.startsWith("workerd"))
    .reduce((a, [, v]) => a + v, 0);
  return { workerd: round((workerd * 1000) / delivered, 3), stack: round((all * 1000) / delivered, 3) };
}
