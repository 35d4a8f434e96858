/**
 * Slow targets without any crash (issue 3; invariants 3 and 7, failure row "worker crashes
 * mid-handler" must not fire when no worker crashed): 60 targets that take 2 s each, due over
 * 3 s. A healthy consumer delivers each exactly once: no lease may expire, no completion may be
 * rejected as stale, and no target may be called a second time for an execution it already
 * answered 2xx.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it, onTestFailed } from "vitest";
import { eventually, percentile, report, sleep, stackForFile } from "./harness.js";

const PORT = 18850;
const JOBS = 60;
const SLOW_HANDLER_MS = 2_000;
/** LEASE_MS (10 s) plus a backoff: a lease that expired wrongly has shown its retry by then */
const SETTLE_MS = 12_000;

const local = stackForFile({ port: PORT, routes: { "/slow": { kind: "slow", ms: SLOW_HANDLER_MS } } });
const { receiver, sink } = local;

describe("slow targets", () => {
  it("delivers 60 two-second targets once each: no lease expiry, no stale completion, no second call after a 2xx (invariants 3 and 7)", async () => {
    onTestFailed(() => console.error(sink.text().slice(-4000)));
    const firstDueAt = Date.now() + 1_500;
    const planned = Array.from({ length: JOBS }, (_, i) => ({
      target: { url: `${receiver.url}/slow`, body: { i, nonce: randomUUID() } },
      runAt: firstDueAt + Math.round((i * 3_000) / JOBS),
    }));
    const jobs = await local.api.createJobs(planned);
    const dueOf = new Map<string, number>(jobs.map((j, i) => [j.id as string, planned[i]!.runAt]));

    await eventually(
      "every target answered 2xx once",
      () => [...dueOf.keys()].every((id) => receiver.requests.some((r) => r.jobId === id && r.completedAt !== null)),
      90_000,
      250,
    );
    const allAnsweredAt = Date.now();
    await sleep(SETTLE_MS);
    const metrics = (await local.api.metrics()).body;

    const calls = new Map<string, number>();
    for (const r of receiver.requests) calls.set(r.webhookId, (calls.get(r.webhookId) ?? 0) + 1);
    // a second call for an execution whose earlier call the target had already answered 2xx
    const calledAgainAfter2xx = receiver.requests.filter((r) =>
      receiver.requests.some((e) => e.webhookId === r.webhookId && e.status === 200 && e.completedAt !== null && e.completedAt < r.at),
    ).length;
    const firstArrival = new Map<string, number>();
    for (const r of receiver.requests) if (!firstArrival.has(r.jobId)) firstArrival.set(r.jobId, r.at);
    const lags = [...firstArrival].map(([jobId, at]) => at - dueOf.get(jobId)!);
    report("slow-targets", {
      jobs: JOBS,
      requests: receiver.requests.length,
      deliveredTwice: [...calls.values()].filter((n) => n > 1).length,
      calledAgainAfter2xx,
      firstDeliveryLagMs: { p50: percentile(lags, 50), p95: percentile(lags, 95), max: Math.max(...lags) },
      lastAnsweredAfterFirstDueMs: allAnsweredAt - firstDueAt,
      counters: {
        leaseExpired: metrics.counters.lease_expired_total,
        staleLeaseRejects: metrics.counters.stale_lease_rejects_total,
        redispatch: metrics.counters.redispatch_total,
        duplicatesSuppressed: metrics.counters.duplicates_suppressed_total,
        succeeded: metrics.counters.succeeded_total,
      },
    });

    expect(metrics.counters.succeeded_total).toBe(JOBS);
    expect(metrics.counters.lease_expired_total).toBe(0);
    expect(metrics.counters.stale_lease_rejects_total).toBe(0);
    expect(calledAgainAfter2xx).toBe(0);
    expect(receiver.requests).toHaveLength(JOBS);
  });
});
