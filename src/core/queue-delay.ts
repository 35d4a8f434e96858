/**
 * A fire message's delay in production's queue (issue 35, item 7), for the local emulation
 * (platform/queue-latency.ts, setting QUEUE_LATENCY) and the dispatch window's tests. The local
 * queue hands a message over in a millisecond or two; production's does not:
 * - the median: Cloudflare's own figure for Queues since GA is "median latency for sending
 *   messages ... ~60ms" (blog.cloudflare.com/how-we-built-cloudflare-queues, October 2024);
 * - the tail: no figure is published. A log-normal with the median and a chosen 99th percentile
 *   stands for it (RPC latencies are right-skewed with a long tail); the bench reports what it used;
 * - the order: "Queues does not guarantee that messages will be delivered to a consumer in the
 *   same order in which they are published" (cloudflare-docs queues/reference/how-queues-works.mdx).
 * Randomness is passed in.
 */
export interface QueueDelay {
  medianMs: number;
  p99Ms: number;
}

/** the standard normal's 99th percentile */
const Z_99 = 2.3263478740408408;
/** a draw is cut here: the log-normal's tail is unbounded, a queue's delay in practice is not */
const CAP_TIMES_P99 = 10;

/** A delay in ms, log-normal with `d`'s median and 99th percentile; `rand` uniform in [0, 1). */
export function drawDelayMs(d: QueueDelay, rand: () => number): number {
  if (d.p99Ms <= d.medianMs) return d.medianMs;
  const sigma = Math.log(d.p99Ms / d.medianMs) / Z_99;
  // Box-Muller: one standard normal from two uniforms (1 - rand() is in (0, 1], so the log is finite)
  const z = Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
  return Math.min(d.medianMs * Math.exp(sigma * z), d.p99Ms * CAP_TIMES_P99);
}
