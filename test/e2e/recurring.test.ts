/**
 * Recurring jobs over real HTTP (issue 4): on the local stack (wrangler dev), a "*\/2 * * * * *"
 * job bounded to 20 s by endAt fires every even second into a loopback receiver that verifies
 * every Standard Webhooks signature. Proves: one execution per occurrence (~10), each delivered
 * exactly once under its own webhook-id (invariant 5), signed, never early and within 2 s of its
 * due second; the job completes after its last occurrence. Prints the lags as one JSON line.
 */
import { describe, expect, it, onTestFailed } from "vitest";
import { CLOCK_TOLERANCE_MS, eventually, percentile, report, sleep, stackForFile } from "./harness.js";

const PORT = 18960;
const WINDOW_MS = 20_000;
const EVERY_MS = 2_000;

const local = stackForFile({ port: PORT });
const { receiver, sink } = local;

describe("a recurring job on the real local stack", () => {
  it("fires */2 s for 20 s: ~10 executions, each exactly once under its own webhook-id, signed, none early, each within 2 s of its due second (issue 4, invariant 5)", async () => {
    onTestFailed(() => console.error(sink.text().slice(-4000)));
    const endAt = Date.now() + WINDOW_MS;
    const res = await local.api.createJob({
      name: "every-2s",
      target: { url: `${receiver.url}/tick`, body: { every: "2s" } },
      cron: "*/2 * * * * *",
      endAt: new Date(endAt).toISOString(),
    });
    expect(res.status).toBe(201);
    const jobId: string = res.body.id;
    const firstDueAt = Date.parse(res.body.nextRunAt!);
    // the occurrences: every even second from the first one up to endAt (inclusive)
    const expectedDues: number[] = [];
    for (let at = firstDueAt; at <= endAt; at += EVERY_MS) expectedDues.push(at);
    expect(firstDueAt % EVERY_MS).toBe(0);
    expect(expectedDues.length).toBeGreaterThanOrEqual(9);
    expect(expectedDues.length).toBeLessThanOrEqual(11);

    // the last occurrence is terminal and mirrored: the job is completed
    await eventually(
      "the job completes after its last occurrence",
      async () => (await local.api.job(jobId)).body.status === "completed",
      endAt - Date.now() + 20_000,
      250,
    );
    const executions = await eventually(
      "every execution is succeeded in the record",
      async () => {
        const list = (await local.api.executions(jobId)).body.executions;
        return list.length === expectedDues.length && list.every((e: { status: string }) => e.status === "succeeded") ? list : undefined;
      },
      10_000,
      250,
    );
    await sleep(1_000); // a duplicate delivery, if any, would arrive by now

    const dueOf = new Map<string, number>(executions.map((e: { id: string; dueAt: string }) => [e.id, Date.parse(e.dueAt)]));
    expect([...dueOf.values()].sort((a, b) => a - b)).toEqual(expectedDues);
    for (const e of executions)
      expect(e.attempts).toEqual([expect.objectContaining({ attempt: 1, outcome: "succeeded", httpStatus: 200 })]);

    const arrivals = receiver.to("/tick");
    const seen = new Map<string, number>();
    const lags: number[] = [];
    for (const r of arrivals) {
      seen.set(r.webhookId, (seen.get(r.webhookId) ?? 0) + 1);
      const dueAt = dueOf.get(r.webhookId);
      expect(dueAt, `a delivery with unknown webhook-id ${r.webhookId}`).toBeDefined();
      expect(r.signatureError).toBeNull();
      expect(r.jobId).toBe(jobId);
      expect(r.headers["idempotency-key"]).toBe(r.webhookId);
      expect(r.attempt).toBe(1);
      expect(JSON.parse(r.body)).toEqual({ every: "2s" });
      lags.push(r.at - dueAt!);
    }
    const byDue = arrivals.map((r, i) => ({ dueAt: dueOf.get(r.webhookId)!, lag: lags[i]! })).sort((a, b) => a.dueAt - b.dueAt);
    const duplicates = [...seen.values()].filter((n) => n > 1).length;
    const early = lags.filter((lag) => lag < -CLOCK_TOLERANCE_MS).length;
    const metrics = (await local.api.metrics()).body;
    report("recurring", {
      cron: "*/2 * * * * *",
      windowMs: WINDOW_MS,
      occurrences: expectedDues.length,
      delivered: arrivals.length,
      distinct: seen.size,
      duplicates,
      early,
      lagMs: {
        min: Math.min(...lags),
        p50: percentile(lags, 50),
        p95: percentile(lags, 95),
        p99: percentile(lags, 99),
        max: Math.max(...lags),
        list: byDue.map((x) => x.lag),
      },
      schedulerLagMs: { p50: metrics.fire_lag_ms?.p50, p95: metrics.fire_lag_ms?.p95, p99: metrics.fire_lag_ms?.p99 },
    });

    expect(arrivals.length).toBeGreaterThanOrEqual(9);
    expect(arrivals.length).toBeLessThanOrEqual(11);
    expect(duplicates).toBe(0);
    expect(seen.size).toBe(expectedDues.length); // every occurrence arrived, each exactly once
    expect(early).toBe(0);
    expect(Math.max(...lags)).toBeLessThan(2_000);
  });
});
