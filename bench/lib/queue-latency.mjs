// The latency mode (SCHEDULER_QUEUE_LATENCY=median_ms,p99_ms): the stack's fire queues deliver each
// send after a log-normal delay (src/platform/queue-latency.ts), and the emulation logs, once a
// second, the most executions each bucket had waiting in it at once. A bucket keeps at most its
// dispatch window unclaimed, so that peak is the window in use (a lower bound when the local queue
// behind the emulation is itself behind).
import { percentileSorted, round } from "./stats.mjs";

const HELD = /queue-latency held (\{.*\})/;

/** The report a log line carries, or null. */
export function heldReportOf(line) {
  const m = HELD.exec(line);
  if (!m) return null;
  try {
    return JSON.parse(m[1]);
  } catch {
    return null;
  }
}

/**
 * The windows in use between `from` and `to` (epoch ms), from the reports (`{ at, peak }`): per
 * bucket, the median and the largest of its per-second peaks; and over the buckets, the median of
 * those medians and the smallest and largest bucket median. Null when no report fell in the range.
 */
export function windowFigures(reports, from, to) {
  const perBucket = new Map();
  for (const r of reports) {
    if (r.at < from || r.at > to) continue;
    for (const [bucket, n] of Object.entries(r.peak)) {
      if (!perBucket.has(bucket)) perBucket.set(bucket, []);
      perBucket.get(bucket).push(n);
    }
  }
  if (perBucket.size === 0) return null;
  const buckets = Object.fromEntries(
    [...perBucket].map(([bucket, peaks]) => {
      const sorted = [...peaks].sort((a, b) => a - b);
      return [bucket, { seconds: sorted.length, median: percentileSorted(sorted, 50), max: sorted[sorted.length - 1] }];
    }),
  );
  const medians = Object.values(buckets)
    .map((b) => b.median)
    .sort((a, b) => a - b);
  return {
    source: "executions each bucket held in the emulated queue delay at once, peak per second (src/platform/queue-latency.ts)",
    medianOfBuckets: round(percentileSorted(medians, 50), 1),
    smallestBucketMedian: medians[0],
    largestBucketMedian: medians[medians.length - 1],
    buckets,
  };
}
