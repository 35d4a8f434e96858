// The workloads of `delayed` and `burst`, defined once: `npm run bench` runs them on the scheduler
// and `npm run bench:peers` on BullMQ, so both get the same jobs at the same due times in the same
// order of creation (bench/README.md "Comparing").

/** how long after the start of the enqueue the first job of `delayed` is due (and the least lead of `burst`) */
export const LEAD_MS = 5000;
/** `delayed`: the due times spread evenly over this long */
export const SPREAD_MS = 10_000;
/** the expected enqueue rate (jobs/s) of `burst` when no `delayed` ran before it */
export const DEFAULT_ENQUEUE_RATE = 4000;
/** the seeded order of creation: shuffle(indexes, SEED[scenario]) (stats.mjs) */
export const SEED = Object.freeze({ delayed: 42, burst: 7 });

/** `delayed`: job i of n is due at t0 + lead + spread * i/n (t0 = the start of the enqueue). */
export function delayedDueAt(t0, i, n, leadMs = LEAD_MS, spreadMs = SPREAD_MS) {
  return t0 + leadMs + Math.round((spreadMs * i) / n);
}

/**
 * `burst`: every job is due at t0 + this, late enough that all of them are created before
 * (the expected enqueue time + 2 s), and at least `minLeadMs`. `expectedEnqueueRate`: what the
 * `delayed` of the same run measured, else DEFAULT_ENQUEUE_RATE (BENCH_BURST_ENQUEUE_RATE).
 */
export function burstLeadMs(n, expectedEnqueueRate, minLeadMs = LEAD_MS) {
  const expectedEnqueueMs = Math.ceil((n * 1000) / expectedEnqueueRate);
  return Math.max(minLeadMs, expectedEnqueueMs + 2000);
}
