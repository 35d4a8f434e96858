/**
 * Local only (setting QUEUE_LATENCY, off by default; config.ts wraps the fire queues with it): a
 * fire queue whose messages reach their consumer after production's delay (core/queue-delay.ts)
 * instead of the local queue's millisecond, so the dispatch window (core/dispatch-window.ts) and
 * the bench meet the jitter production has (issue 35, item 7).
 *
 * Each message waits its own draw, then goes to the real queue, so messages overtake one another,
 * within a call and across calls. A call returns once all its messages are in: nothing is left
 * running after it returns, and a failed send fails the call, as before. Its caller therefore waits
 * for the slowest of its messages where production's send returns after one latency: a bucket's
 * alarm (which awaits its send) passes less often than in production when it sends many messages
 * at once, which can only make the emulation slower than production, never faster.
 *
 * What it holds is reported for the bench: once a second at most, a log line
 * `queue-latency held {"at":...,"peak":{"<bucket>":<executions>},"executions":n}` with the most
 * executions each bucket had waiting here at once during that second and the executions sent
 * (bench/lib/queue-latency.mjs reads them). A bucket keeps at most its window unclaimed, so its
 * peak is its window in use whenever the local queue behind this one is not behind.
 */

import { drawDelayMs, type QueueDelay } from "../core/queue-delay";
import type { FireGroup } from "../protocol/fire";

const REPORT_EVERY_MS = 1_000;

/** Executions waiting here, per bucket, and the peaks since the last report (per isolate). */
class Held {
  private readonly now = new Map<number, number>();
  private peak = new Map<number, number>();
  private executions = 0;
  private reportedAt = 0;

  add(bucket: number, by: number): void {
    const held = (this.now.get(bucket) ?? 0) + by;
    this.now.set(bucket, held);
    if (by > 0) {
      this.executions += by;
      this.peak.set(bucket, Math.max(this.peak.get(bucket) ?? 0, held));
    }
  }

  report(at: number): void {
    // the first period starts with the first send: a report of its send alone says little
    if (this.reportedAt === 0) this.reportedAt = at;
    if (at - this.reportedAt < REPORT_EVERY_MS || this.peak.size === 0) return;
    console.log(`queue-latency held ${JSON.stringify({ at, peak: Object.fromEntries(this.peak), executions: this.executions })}`);
    this.reportedAt = at;
    this.executions = 0;
    // the next period starts from what is held now
    this.peak = new Map([...this.now].filter(([, n]) => n > 0));
  }
}

const held = new Held();

/** `queue` with `delay` before every message; `rand` draws the delays (Math.random unless a test seeds it). */
export function withQueueLatency(queue: Queue<FireGroup>, delay: QueueDelay, rand: () => number = Math.random): Queue<FireGroup> {
  const later = async <T>(body: FireGroup, send: () => Promise<T>): Promise<T> => {
    held.add(body.bucket, body.executions.length);
    try {
      await new Promise((resolve) => setTimeout(resolve, drawDelayMs(delay, rand)));
      return await send();
    } finally {
      held.add(body.bucket, -body.executions.length);
      held.report(Date.now());
    }
  };
  return {
    metrics: () => queue.metrics(),
    send: (body, options) => later(body, () => queue.send(body, options)),
    sendBatch: async (messages, options) => {
      const list = [...messages];
      if (list.length === 0) return queue.sendBatch(list, options);
      const sent = await Promise.allSettled(list.map((m) => later(m.body, () => queue.sendBatch([m], options))));
      for (const s of sent) if (s.status === "rejected") throw s.reason;
      return (sent[sent.length - 1] as PromiseFulfilledResult<QueueSendBatchResponse>).value;
    },
  };
}
