/**
 * The core path over real HTTP (issue 2): the local stack (wrangler dev) fires jobs at their due
 * time into a loopback receiver that verifies every Standard Webhooks signature.
 * Proves: each job arrives exactly once, signed, with its own body, never early, and p99 lag
 * under 2 s; the README's curl example works as written.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it, onTestFailed } from "vitest";
import { CLOCK_TOLERANCE_MS, eventually, percentile, report, sleep, stackForFile } from "./harness.js";

const PORT = 18810;
const JOBS = 200;

const local = stackForFile({ port: PORT });
const { receiver, sink } = local;

describe("core path over the real local stack", () => {
  it("delivers 200 jobs exactly once each, signed, with their own body, never early, p99 lag < 2 s (issue 2, invariant 5)", async () => {
    onTestFailed(() => console.error(sink.text().slice(-4000)));
    // due times spread over 3-6 s from now, absolute (runAt), one distinct body each
    const firstDueAt = Date.now() + 3_000;
    const planned = Array.from({ length: JOBS }, (_, i) => {
      const dueAt = firstDueAt + Math.round((i * 3_000) / JOBS);
      const body = { seq: i, nonce: randomUUID() };
      return { dueAt, body, spec: { target: { url: `${receiver.url}/core`, body }, runAt: new Date(dueAt).toISOString() } };
    });
    const jobs = await local.api.createJobs(planned.map((p) => p.spec));
    const createdAt = Date.now();
    // precondition: every job was accepted before the first one fell due, so runAt was honoured as given
    expect(createdAt).toBeLessThan(firstDueAt);
    expect(jobs).toHaveLength(JOBS);

    const byJob = new Map<string, { dueAt: number; body: string }>();
    jobs.forEach((job, i) => {
      const p = planned[i]!;
      expect(Date.parse(job.nextRunAt!)).toBe(p.dueAt);
      byJob.set(job.id, { dueAt: p.dueAt, body: JSON.stringify(p.body) });
    });

    const lastDueAt = planned[JOBS - 1]!.dueAt;
    await eventually(
      `all ${JOBS} jobs arrive`,
      () => new Set(receiver.to("/core").map((r) => r.jobId)).size >= JOBS,
      lastDueAt - Date.now() + 15_000,
    );
    // every execution succeeded (a terminal row is never delivered again), so nothing is still in flight
    const metrics = await eventually(
      "the scheduler counts every job succeeded",
      async () => {
        const m = (await local.api.metrics()).body;
        return (m.counters.succeeded_total ?? 0) >= JOBS ? m : undefined;
      },
      15_000,
      250,
    );
    await sleep(500);

    const arrivals = receiver.to("/core");
    const seen = new Map<string, number>();
    const lags: number[] = [];
    for (const r of arrivals) {
      seen.set(r.jobId, (seen.get(r.jobId) ?? 0) + 1);
      const planned = byJob.get(r.jobId);
      expect(planned, `unknown job ${r.jobId}`).toBeDefined();
      expect(r.signatureError).toBeNull();
      expect(r.method).toBe("POST");
      expect(r.body).toBe(planned!.body);
      expect(r.headers["content-type"]).toBe("application/json");
      expect(r.headers["idempotency-key"]).toBe(r.webhookId);
      expect(r.webhookId).toMatch(/^exe_/);
      expect(r.attempt).toBe(1);
      lags.push(r.at - planned!.dueAt);
    }
    const duplicates = [...seen.values()].filter((n) => n > 1).length;
    const missing = [...byJob.keys()].filter((id) => !seen.has(id)).length;
    const early = lags.filter((lag) => lag < -CLOCK_TOLERANCE_MS).length;
    const figures = {
      jobs: JOBS,
      delivered: arrivals.length,
      distinct: seen.size,
      duplicates,
      missing,
      early,
      lagMs: {
        min: Math.min(...lags),
        p50: percentile(lags, 50),
        p95: percentile(lags, 95),
        p99: percentile(lags, 99),
        max: Math.max(...lags),
      },
      schedulerLagMs: { p50: metrics.fire_lag_ms.p50, p95: metrics.fire_lag_ms.p95, p99: metrics.fire_lag_ms.p99 },
      counters: {
        succeeded: metrics.counters.succeeded_total,
        failedAttempts: metrics.counters.failed_attempts_total,
        duplicatesSuppressed: metrics.counters.duplicates_suppressed_total,
        redispatch: metrics.counters.redispatch_total,
      },
    };
    report("core-path", figures);

    expect(missing).toBe(0);
    expect(duplicates).toBe(0);
    expect(arrivals).toHaveLength(JOBS);
    expect(early).toBe(0);
    expect(figures.lagMs.p99).toBeLessThan(2_000);
  });

  it("runs the README's curl example: one signed POST with the body, within 2 s of due", async () => {
    onTestFailed(() => console.error(sink.text().slice(-4000)));
    // curl -X POST $URL/v1/jobs -H "Authorization: Bearer $KEY" -H 'content-type: application/json' \
    //   -d '{"target":{"url":"https://example.com/hook","body":{"hello":"world"}},"delay":"5s"}'
    const res = await local.api.createJob({ target: { url: `${receiver.url}/hook`, body: { hello: "world" } }, delay: "5s" });
    expect(res.status).toBe(201);
    const dueAt = Date.parse(res.body.nextRunAt!);

    const [arrival] = await eventually(
      "the hook is called",
      () => {
        const got = receiver.to("/hook");
        return got.length > 0 ? got : undefined;
      },
      dueAt - Date.now() + 10_000,
    );
    await eventually(
      "the execution is succeeded",
      async () => (await local.api.job(res.body.id)).body.latestExecution?.status === "succeeded",
      10_000,
      200,
    );
    await sleep(500);

    const lagMs = arrival!.at - dueAt;
    report("readme-example", { lagMs, deliveries: receiver.to("/hook").length });
    expect(receiver.to("/hook")).toHaveLength(1);
    expect(arrival!.method).toBe("POST");
    expect(arrival!.signatureError).toBeNull();
    expect(JSON.parse(arrival!.body)).toEqual({ hello: "world" });
    expect(arrival!.jobId).toBe(res.body.id);
    expect(lagMs).toBeGreaterThanOrEqual(-CLOCK_TOLERANCE_MS);
    expect(lagMs).toBeLessThan(2_000);
  });

  it("keeps a create request's W3C trace: each attempt is sent a child span of it, which the attempt shows (issue 29)", async () => {
    onTestFailed(() => console.error(sink.text().slice(-4000)));
    const traceId = randomUUID().replaceAll("-", "");
    const traceparent = `00-${traceId}-00f067aa0ba902b7-01`;
    const path = "/traced";
    receiver.on(path, { kind: "failTimes", times: 1, status: 503 });
    const res = await local.api.createJob(
      { target: { url: `${receiver.url}${path}` }, retry: { maxAttempts: 3, initialDelayMs: 500, jitter: 0 } },
      { traceparent, tracestate: "vendor=abc" },
    );
    expect(res.status).toBe(201);
    const attempts = await eventually(
      "two attempts, the second succeeded",
      async () => {
        const [execution] = (await local.api.executions(res.body.id)).body.executions;
        return execution?.status === "succeeded" ? execution.attempts : undefined;
      },
      15_000,
      200,
    );
    const arrivals = receiver.to(path);
    expect(arrivals).toHaveLength(2);
    const sent = arrivals.map((r) => r.headers!.traceparent!.split("-"));
    for (const [i, [version, trace, span, flags]] of sent.entries()) {
      expect([version, trace, flags]).toEqual(["00", traceId, "01"]);
      expect(span).toMatch(/^[0-9a-f]{16}$/);
      expect(span).toBe(attempts[i]!.spanId);
      expect(arrivals[i]!.headers!.tracestate).toBe("vendor=abc");
    }
    expect(sent[0]![2]).not.toBe(sent[1]![2]);
    expect(attempts.map((a) => a.spanId)).not.toContain("00f067aa0ba902b7");
  });
});
