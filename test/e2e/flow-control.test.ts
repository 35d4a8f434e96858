/**
 * Flow control over the real local stack (issue 13): 150 one-off jobs due at the same instant,
 * all on one key with rate 50 per second and parallelism 5, against a target that answers 200
 * after 100 ms. Proves: the target never has more than 5 requests in flight, no 1,000 ms window
 * holds more than 50 arrivals, every job succeeds with exactly one attempt (a wait uses none),
 * the waits show as waitMs and flow_waits_total, and no execution is delivered twice.
 *
 * Measured at the receiver, which sees each request inside its permit (the gate grants before
 * the request is sent and frees the slot only after the answer came back): concurrency there can
 * only be lower than the gate's, so it is checked without slack. The order of arrivals and
 * answers is taken from the receiver's own event order (one Node thread), not from millisecond
 * timestamps, so ties need no rule. Arrival times do carry the network delay after the grant, so
 * a rate window could in principle look fuller than the gate's by the spread of that delay; the
 * smallest span of 51 consecutive arrivals is reported to show the margin.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it, onTestFailed } from "vitest";
import { eventually, percentile, type Received, report, stackForFile } from "./harness.js";

const PORT = 18870;
const JOBS = 150;
const KEY = "billing-api";
const RATE = 50;
const PERIOD_SECONDS = 1;
const PARALLELISM = 5;
const HANDLER_MS = 100;
const ROUTE = "/billing";
const DRAIN_DEADLINE_MS = 60_000;

/** when the receiver saw a request arrive and its answer leave, and in which order */
interface Timing {
  arrivedSeq: number;
  arrivedAt: number;
  answeredSeq: number | null;
  answeredAt: number | null;
}

const timings = new Map<Received, Timing>();
let sequence = 0;
/** sub-millisecond wall clock, so arrival spans are not rounded */
const clock = () => performance.timeOrigin + performance.now();

// the slow target, and the order of every arrival and answer as the receiver's hooks see them
const local = stackForFile({
  port: PORT,
  routes: { [ROUTE]: { kind: "slow", ms: HANDLER_MS } },
  hooks: {
    onRequest: (r) => {
      timings.set(r, { arrivedSeq: ++sequence, arrivedAt: clock(), answeredSeq: null, answeredAt: null });
    },
    onAnswered: (r) => {
      const t = timings.get(r);
      if (!t) return;
      t.answeredSeq = ++sequence;
      t.answeredAt = clock();
    },
  },
});
const { receiver, sink } = local;

describe("flow control", () => {
  it("holds 150 simultaneous jobs of one key to rate 50/s and parallelism 5, each succeeding on its first attempt, none twice (issue 13)", async () => {
    onTestFailed(() => console.error(sink.text().slice(-6000)));
    const dueAt = Date.now() + 2_000;
    const flowControl = { key: KEY, rate: RATE, periodSeconds: PERIOD_SECONDS, parallelism: PARALLELISM };
    const jobs = await local.api.createJobs(
      Array.from({ length: JOBS }, (_, i) => ({
        target: { url: `${receiver.url}${ROUTE}`, body: { i, nonce: randomUUID() } },
        runAt: new Date(dueAt).toISOString(),
        flowControl,
      })),
    );
    // precondition: every job was accepted before they fell due, all at the same instant
    expect(Date.now()).toBeLessThan(dueAt);
    expect(jobs).toHaveLength(JOBS);
    for (const job of jobs) expect(Date.parse(job.nextRunAt!)).toBe(dueAt);
    const jobIds = new Set(jobs.map((j) => j.id));

    const answered2xx = () => receiver.to(ROUTE).filter((r) => r.status !== null && r.status >= 200 && r.status < 300);
    await eventually(
      `all ${JOBS} jobs answered 2xx`,
      () => new Set(answered2xx().map((r) => r.jobId)).size >= JOBS,
      DRAIN_DEADLINE_MS,
      100,
    );

    // every execution as the API shows it: succeeded, with its single attempt
    const executions = await eventually(
      "every job's execution shows succeeded",
      async () => {
        const views = await mapLimited([...jobIds], 10, async (id) => {
          const res = await local.api.executions(id);
          expect(res.status).toBe(200);
          return { id, executions: res.body.executions };
        });
        return views.every((v) => v.executions.length === 1 && v.executions[0]!.status === "succeeded") ? views : undefined;
      },
      30_000,
      500,
    );
    // the jobs whose attempt says it waited; the attempt's waitMs is presentAttempt's, always sent
    const attempts = executions.flatMap((v) => v.executions.flatMap((e) => e.attempts));
    const waits = attempts.map((a) => a.waitMs);
    const waited = waits.filter((w) => w > 0).length;
    // a bucket counts a job's waits before it counts the job succeeded, and the metrics read each
    // bucket's counts as they stand: once every success shows, every wait does
    const metrics = await eventually(
      "the metrics count every job succeeded",
      async () => {
        const m = (await local.api.metrics()).body;
        return (m.counters.succeeded_total ?? 0) >= JOBS ? m : undefined;
      },
      15_000,
      250,
    );
    const key = await local.api.request<Record<string, unknown>>("GET", `/v1/flow-control/${KEY}`);

    // what the target saw
    const requests = receiver.to(ROUTE);
    const perWebhookId = new Map<string, number>();
    for (const r of requests) perWebhookId.set(r.webhookId, (perWebhookId.get(r.webhookId) ?? 0) + 1);
    const duplicates = [...perWebhookId.values()].filter((n) => n > 1).length;
    const unknownJobs = requests.filter((r) => !jobIds.has(r.jobId)).length;

    // in flight at the target: +1 on each arrival, -1 on each answer, in the receiver's event order
    const events: { seq: number; delta: number }[] = [];
    for (const r of requests) {
      const t = timings.get(r)!;
      events.push({ seq: t.arrivedSeq, delta: 1 });
      if (t.answeredSeq !== null) events.push({ seq: t.answeredSeq, delta: -1 });
    }
    events.sort((a, b) => a.seq - b.seq);
    let inFlight = 0;
    let maxInFlight = 0;
    for (const e of events) {
      inFlight += e.delta;
      maxInFlight = Math.max(maxInFlight, inFlight);
    }

    // arrivals per sliding window of one period: the most any [t, t + period) holds
    const periodMs = PERIOD_SECONDS * 1_000;
    const maxPerWindow = (times: number[]) => {
      const sorted = [...times].sort((a, b) => a - b);
      let most = 0;
      let start = 0;
      for (let end = 0; end < sorted.length; end++) {
        while (sorted[end]! - sorted[start]! >= periodMs) start += 1;
        most = Math.max(most, end - start + 1);
      }
      return most;
    };
    /** the shortest time spanned by RATE + 1 consecutive arrivals (>= periodMs: no window over the rate) */
    const minSpan = (times: number[]) => {
      const sorted = [...times].sort((a, b) => a - b);
      let min = Number.POSITIVE_INFINITY;
      for (let i = 0; i + RATE < sorted.length; i++) min = Math.min(min, sorted[i + RATE]! - sorted[i]!);
      return Number.isFinite(min) ? Math.round(min * 1000) / 1000 : null;
    };
    const arrivalsHr = requests.map((r) => timings.get(r)!.arrivedAt);
    const arrivalsMs = requests.map((r) => r.at);
    const maxPerWindowHr = maxPerWindow(arrivalsHr);
    const maxPerWindowMs = maxPerWindow(arrivalsMs);

    const firstArrival = Math.min(...arrivalsMs);
    const lastAnswer = Math.max(...requests.map((r) => r.completedAt ?? Number.NaN));
    const arrivalsPerSecond = new Map<number, number>();
    for (const at of arrivalsMs) {
      const second = Math.floor((at - dueAt) / 1_000);
      arrivalsPerSecond.set(second, (arrivalsPerSecond.get(second) ?? 0) + 1);
    }

    report("flow-control", {
      jobs: JOBS,
      limits: { rate: RATE, periodSeconds: PERIOD_SECONDS, parallelism: PARALLELISM },
      requests: requests.length,
      duplicates,
      maxInFlight,
      maxPerWindow: maxPerWindowHr,
      maxPerWindowMsClock: maxPerWindowMs,
      minSpanOf51ArrivalsMs: minSpan(arrivalsHr),
      drainMs: {
        firstArrivalAfterDue: firstArrival - dueAt,
        lastAnswerAfterDue: lastAnswer - dueAt,
        firstArrivalToLastAnswer: lastAnswer - firstArrival,
      },
      arrivalsPerSecondFromDue: Object.fromEntries([...arrivalsPerSecond].sort((a, b) => a[0] - b[0])),
      waitMs: {
        waited,
        p50: percentile(waits, 50),
        p95: percentile(waits, 95),
        max: Math.max(...waits),
      },
      counters: {
        flowWaits: metrics.counters.flow_waits_total,
        succeeded: metrics.counters.succeeded_total,
        failedAttempts: metrics.counters.failed_attempts_total,
        leaseExpired: metrics.counters.lease_expired_total,
        staleLeaseRejects: metrics.counters.stale_lease_rejects_total,
        redispatch: metrics.counters.redispatch_total,
      },
      key: key.body,
    });

    // the target: every job once, signed, on its first attempt
    expect(unknownJobs).toBe(0);
    expect(duplicates).toBe(0);
    expect(perWebhookId.size).toBe(JOBS);
    expect(requests).toHaveLength(JOBS);
    for (const r of requests) {
      expect(r.signatureError).toBeNull();
      expect(r.attempt).toBe(1);
      expect(r.status).toBe(200);
      expect(r.aborted).toBe(false);
    }
    // the limits, without slack
    expect(maxInFlight).toBeLessThanOrEqual(PARALLELISM);
    expect(maxPerWindowHr).toBeLessThanOrEqual(RATE);
    expect(maxPerWindowMs).toBeLessThanOrEqual(RATE);
    // the API: one execution per job, succeeded with one attempt; waits used none
    for (const v of executions) {
      expect(v.executions).toHaveLength(1);
      const e = v.executions[0]!;
      expect(e.status).toBe("succeeded");
      expect(e.attempts).toHaveLength(1);
      const a = e.attempts[0]!;
      expect(a.attempt).toBe(1);
      expect(a.outcome).toBe("succeeded");
      expect(a.httpStatus).toBe(200);
      // present and a real duration (not undefined or null)
      expect(Number.isFinite(a.waitMs), `waitMs of job ${v.id}: ${a.waitMs}`).toBe(true);
      expect(a.waitMs).toBeGreaterThanOrEqual(0);
    }
    // all 150 fall due at once and only PARALLELISM permits are free then, so all but about that
    // many wait: 144 and 145 of 150 waited on a quiet machine, 139 at load 3.3 (first deliveries
    // spread out, some found a permit free). At most 5 * PARALLELISM (25) may go unheld, over twice
    // the most seen under load; a stack that stopped recording waits, or lost most of them, fails
    expect(waited).toBeGreaterThanOrEqual(JOBS - 5 * PARALLELISM);
    // each job that waited was held back at least once, and each hold counts one flow wait
    expect(metrics.counters.flow_waits_total).toBeGreaterThanOrEqual(waited);
    expect(metrics.counters.succeeded_total).toBe(JOBS);
    expect(metrics.counters.failed_attempts_total ?? 0).toBe(0);
  });
});

/** `fn` over `items`, at most `limit` at once, results in order. */
async function mapLimited<T, R>(items: T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]!);
      }
    }),
  );
  return out;
}
