/**
 * Metrics and accounting: GET /v1/metrics (every counter of core/metrics.ts and fire-lag
 * quantiles), GET /metrics (Prometheus text), tenant scoping, and invariant 4 (nothing silently
 * dropped: every accepted execution is in exactly one state, and the counts add up).
 *
 * The fire queue binding is replaced for the whole file (sends are captured, never consumed in
 * the background); executions run only when a test calls fire().
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Bucket } from "../../src/bucket/bucket";
import { COUNTERS, type MetricsSummary } from "../../src/core/metrics";
import { LAG_BOUNDS_MS } from "../../src/core/histogram";
import {
  api,
  bucketRow,
  bucketSql,
  bucketStub,
  createJob,
  executionOf,
  fire,
  fireMessage,
  KEYS,
  receiverUrl,
  uniquePath,
} from "./helpers";

const BUCKETS = 4; // vitest.config.ts

beforeAll(() => {
  vi.spyOn(env.FIRE_QUEUE_0!, "sendBatch").mockResolvedValue({ metadata: { metrics: { backlogCount: 0, backlogBytes: 0 } } });
});
afterAll(() => vi.restoreAllMocks());

/** Every job this file created (its 201s): invariant 4 accounts for each of them. */
let accepted = 0;

async function newExecution(body: Record<string, unknown>, key: string = KEYS.acme) {
  const job = await createJob(body, key);
  accepted += 1;
  const exe = (await executionOf(job.id))!;
  const stub = bucketStub(exe.bucket);
  return { job, exe, stub, row: async () => bucketRow(stub, exe.id), message: fireMessage(exe) };
}
type Execution = Awaited<ReturnType<typeof newExecution>>;

async function dispatchNow(e: Execution): Promise<void> {
  await bucketSql(e.stub, "UPDATE executions SET due_at = ? WHERE id = ?", Date.now() - 1, e.exe.id);
  await runInDurableObject(e.stub, (instance: Bucket) => instance.alarm());
  expect((await e.row())?.status).toBe("dispatched");
}

/** Creates a job due now and runs it through the consumer once. */
async function runOnce(path: string, key: string = KEYS.acme): Promise<Execution> {
  const e = await newExecution({ target: { url: `${receiverUrl()}${path}` }, retry: { maxAttempts: 3, initialDelayMs: 1000, jitter: 0 } }, key);
  await dispatchNow(e);
  const result = await fire([{ ...e.message, tenant: e.exe.tenant }]);
  expect(result.explicitAcks).toEqual(["m0"]);
  return e;
}

const metrics = (key: string = KEYS.acme) => api("/v1/metrics", {}, key).then((r) => r.json<MetricsSummary>());

describe("metrics endpoints", () => {
  it("reports every counter and the fire-lag p50/p95/p99 as JSON", async () => {
    await runOnce(uniquePath());
    await runOnce(uniquePath());
    const res = await api("/v1/metrics");
    expect(res.status).toBe(200);
    const summary = await res.json<MetricsSummary>();
    expect(Object.keys(summary.counters).sort()).toEqual([...COUNTERS].sort());
    for (const name of COUNTERS) expect(typeof summary.counters[name]).toBe("number");
    expect(summary.counters.fired_total).toBeGreaterThanOrEqual(2);
    expect(summary.counters.succeeded_total).toBeGreaterThanOrEqual(2);

    const lag = summary.fire_lag_ms;
    expect(lag.count).toBeGreaterThanOrEqual(2);
    for (const q of [lag.p50, lag.p95, lag.p99]) expect(typeof q).toBe("number");
    expect(lag.p50!).toBeLessThanOrEqual(lag.p95!);
    expect(lag.p95!).toBeLessThanOrEqual(lag.p99!);
    expect(lag.buckets.map((b) => b.le)).toEqual([...LAG_BOUNDS_MS.map(String), "+Inf"]);
    expect(lag.buckets.reduce((sum, b) => sum + b.count, 0)).toBe(lag.count);
    expect(summary.dead_total_by_reason).toBeTypeOf("object");
  });

  it("serves GET /metrics as Prometheus text with HELP/TYPE lines and the scheduler_ prefix", async () => {
    await runOnce(uniquePath("fail/404")); // a dead_total{reason} sample
    expect((await api("/metrics", {}, null)).status).toBe(401);
    const res = await api("/metrics");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    const lines = text.trimEnd().split("\n");
    for (const name of COUNTERS) {
      expect(lines).toContain(`# TYPE scheduler_${name} counter`);
      expect(lines.some((l) => l.startsWith(`# HELP scheduler_${name} `))).toBe(true);
    }
    expect(lines).toContain("# TYPE scheduler_fire_lag_ms histogram");
    for (const line of lines.filter((l) => !l.startsWith("#"))) {
      expect(line).toMatch(/^scheduler_[a-z_]+(\{[a-z]+="[^"]*"\})? \d+$/);
    }

    const json = await metrics();
    const sample = (series: string) => Number(lines.find((l) => l.startsWith(`${series} `))?.split(" ")[1]);
    expect(sample("scheduler_succeeded_total")).toBe(json.counters.succeeded_total);
    expect(sample('scheduler_dead_total{reason="permanent"}')).toBe(json.dead_total_by_reason.permanent);
    expect(sample('scheduler_fire_lag_ms_bucket{le="+Inf"}')).toBe(json.fire_lag_ms.count);
    expect(sample("scheduler_fire_lag_ms_count")).toBe(json.fire_lag_ms.count);
  });

  it("scopes metrics to the tenant of the API key", async () => {
    const acmeBefore = await metrics(KEYS.acme);
    const globexBefore = await metrics(KEYS.globex);
    await runOnce(uniquePath(), KEYS.globex);
    await runOnce(uniquePath("fail/404"), KEYS.acme);
    const acme = await metrics(KEYS.acme);
    const globex = await metrics(KEYS.globex);

    expect(globex.counters.succeeded_total! - globexBefore.counters.succeeded_total!).toBe(1);
    expect(globex.counters.dead_total! - globexBefore.counters.dead_total!).toBe(0);
    expect(globex.fire_lag_ms.count - globexBefore.fire_lag_ms.count).toBe(1);
    expect(acme.counters.succeeded_total! - acmeBefore.counters.succeeded_total!).toBe(0);
    expect(acme.counters.dead_total! - acmeBefore.counters.dead_total!).toBe(1);
    expect(acme.fire_lag_ms.count - acmeBefore.fire_lag_ms.count).toBe(1);
    // the tenant's second key sees the same tenant
    expect(await metrics(KEYS.acme2)).toEqual(acme);
  });
});

describe("accounting", () => {
  it("holds every accepted execution in exactly one state, and the counts add up (invariant 4)", async () => {
    const url = () => `${receiverUrl()}${uniquePath()}`;
    const expected = new Map<string, string>(); // execution id -> where it must be

    const succeeded = await runOnce(uniquePath());
    expected.set(succeeded.exe.id, "succeeded");
    const dead = await runOnce(uniquePath("fail/404"));
    expected.set(dead.exe.id, "dead");
    const retrying = await runOnce(uniquePath("fail/503"));
    expected.set(retrying.exe.id, "scheduled");

    const canceled = await newExecution({ target: { url: url() }, delay: "60s" });
    expect((await api(`/v1/jobs/${canceled.job.id}`, { method: "DELETE" })).status).toBe(200);
    expected.set(canceled.exe.id, "canceled");
    const future = await newExecution({ target: { url: url() }, delay: "60s" });
    expected.set(future.exe.id, "scheduled");
    const pending = await newExecution({ target: { url: url() }, delay: "10m" }); // beyond the 3 min lookahead
    expected.set(pending.exe.id, "pending");
    const canceledPending = await newExecution({ target: { url: url() }, delay: "10m" });
    expect((await api(`/v1/jobs/${canceledPending.job.id}`, { method: "DELETE" })).status).toBe(200);
    expected.set(canceledPending.exe.id, "canceled in D1 only");
    const dispatched = await newExecution({ target: { url: url() } });
    await dispatchNow(dispatched);
    expected.set(dispatched.exe.id, "dispatched");
    const running = await newExecution({ target: { url: url() } });
    await dispatchNow(running);
    expect((await running.stub.claim([running.exe.id]))[0]?.ok).toBe(true);
    expected.set(running.exe.id, "running");

    // D1: every 201 of this file is a row (invariant 1), and where each row is
    const d1 = (await env.DB.prepare("SELECT id, status FROM executions").all<{ id: string; status: string }>()).results;
    expect(d1).toHaveLength(accepted);
    const d1Pending = new Set(d1.filter((r) => r.status === "pending").map((r) => r.id));

    // buckets: every row, and the counts() RPC
    const inBucket = new Map<string, string>();
    let bucketTotal = 0;
    for (let k = 0; k < BUCKETS; k++) {
      const stub = bucketStub(k);
      const rows = await bucketSql<{ id: string; status: string }>(stub, "SELECT id, status FROM executions");
      for (const r of rows) {
        expect(inBucket.has(r.id), `${r.id} is in two buckets`).toBe(false);
        inBucket.set(r.id, r.status);
      }
      const { byStatus } = await stub.counts();
      const sum = Object.values(byStatus).reduce((a, b) => a + b, 0);
      expect(sum).toBe(rows.length);
      bucketTotal += sum;
    }

    // exactly one place per execution: D1 pending, D1-only terminal (canceled before hand-off), or a bucket
    const d1OnlyTerminal = d1.filter((r) => ["succeeded", "dead", "canceled"].includes(r.status) && !inBucket.has(r.id));
    for (const r of d1) {
      const places = [d1Pending.has(r.id), inBucket.has(r.id), d1OnlyTerminal.some((t) => t.id === r.id)].filter(Boolean).length;
      expect(places, `${r.id} (${r.status} in D1) is in ${places} places`).toBe(1);
    }
    for (const id of inBucket.keys()) expect(d1.some((r) => r.id === id), `${id} is in a bucket but not in D1`).toBe(true);
    expect(accepted).toBe(d1Pending.size + d1OnlyTerminal.length + bucketTotal);

    // and each execution of the mix is where it must be
    for (const [id, where] of expected) {
      if (where === "pending") expect(d1Pending.has(id) && !inBucket.has(id)).toBe(true);
      else if (where === "canceled in D1 only") expect(d1OnlyTerminal.map((t) => t.id)).toContain(id);
      else expect(inBucket.get(id), id).toBe(where);
    }
  });
});
