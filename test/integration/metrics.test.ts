/**
 * Metrics and accounting: GET /v1/metrics (every counter of core/metrics.ts and fire-lag
 * quantiles), GET /metrics (Prometheus text), tenant scoping, and invariant 4 (nothing silently
 * dropped: every accepted execution is in exactly one state, and the counts add up).
 *
 * Revision 2: a one-off job's execution is pending in D1 (the job is active and its bucket does
 * not hold it), held by its bucket (scheduled as a durable row; dispatched, running, or finished
 * and on its way to D1, in memory), or terminal on its D1 job row (run_status, written once by the
 * bucket's flush). A job canceled before its bucket ever held it is canceled in D1 only. The
 * census below reads D1's rows, each bucket's rows, inspect() and counts(), and checks that every
 * 201 of this file is in exactly one place, before and after the flush that moves outcomes to D1,
 * and that the counters (kept in bucket memory, written with flushes, read stored + pending)
 * add up to what the census shows.
 *
 * Time: one file-wide virtual clock (helpers.fileClock) 10 minutes ahead of the real one, so no
 * bucket alarm fires on its own; tests run the alarms. Every fire-queue send is captured
 * (captureFiresForFile) and fed to the consumer with fire().
 *
 * With several D1 shards the census reads every shard (allShards), and d1_rows_written_total is
 * also shown per shard.
 */
import { describe, expect, it } from "vitest";
import type { FireMessage, LiveExecution } from "../../src/bucket/protocol";
import { LAG_BOUNDS_MS } from "../../src/core/histogram";
import { oneOffExecutionId } from "../../src/core/id";
import { COUNTERS, type MetricsSummary } from "../../src/core/metrics";
import {
  allShards,
  api,
  bucketSql,
  bucketStub,
  CONFIG,
  captureFiresForFile,
  createJob,
  executionOf,
  FLUSH_DELAY_MS,
  fileClock,
  fire,
  jobRow,
  KEYS,
  live,
  receiverUrl,
  runAlarm,
  uniquePath,
} from "./helpers";

const BUCKETS = CONFIG.BUCKETS;
const clock = fileClock(10 * 60_000);
const sent = captureFiresForFile();

/** Every job this file created (its 201s): invariant 4 accounts for each of them. */
let accepted = 0;

async function newExecution(body: Record<string, unknown>, key: string = KEYS.acme) {
  const job = await createJob(body, key);
  accepted += 1;
  const exe = (await executionOf(job.id))!;
  const stub = bucketStub(exe.bucket);
  return { job, exe, stub, view: async () => live(stub, exe.id) };
}
type Execution = Awaited<ReturnType<typeof newExecution>>;

/** Runs the execution's bucket alarm at its due time; returns the fire message it sent for it. */
async function dispatchNow(e: Execution): Promise<FireMessage> {
  clock.travelTo(Math.max(clock.at, e.exe.due_at));
  await runAlarm(e.stub);
  const mine = sent.filter((m) => m.executionId === e.exe.id);
  for (const m of mine) sent.splice(sent.indexOf(m), 1);
  expect(mine).toHaveLength(1);
  expect((await e.view())?.status).toBe("dispatched");
  return mine[0]!;
}

/** Creates a job due now and runs it through the consumer once; its outcome is then flushed to D1. */
async function runOnce(
  path: string,
  key: string = KEYS.acme,
  retry: Record<string, unknown> = { maxAttempts: 3, initialDelayMs: 1000, jitter: 0 },
): Promise<Execution> {
  const e = await newExecution({ target: { url: `${receiverUrl()}${path}` }, retry }, key);
  const message = await dispatchNow(e);
  const result = await fire([message]);
  expect(result.explicitAcks).toEqual(["m0"]);
  await clock.flush(e.stub);
  return e;
}

/** Writes every bucket's finished outcomes to D1 at once (one flush delay, then every alarm). */
async function flushAll(): Promise<void> {
  clock.advance(FLUSH_DELAY_MS);
  for (let k = 0; k < BUCKETS; k++) await runAlarm(bucketStub(k));
}

const metrics = (key: string = KEYS.acme) => api("/v1/metrics", {}, key).then((r) => r.json<MetricsSummary>());

/**
 * Counters every tenant's view shows whole (SYSTEM_TENANT: the platform's billing meters, moved by
 * any request of any tenant, reads of metrics included): left out where a view must not move.
 */
const METERS = ["do_rows_written_total", "d1_rows_written_total", "alarms_set_total", "do_requests_total"];
function tenantOnly(summary: MetricsSummary): MetricsSummary {
  return { ...summary, counters: Object.fromEntries(Object.entries(summary.counters).filter(([name]) => !METERS.includes(name))) };
}

describe("metrics endpoints", () => {
  it("reports every counter and the fire-lag p50/p95/p99 as JSON", async () => {
    const before = await metrics();
    await runOnce(uniquePath());
    await runOnce(uniquePath());
    const res = await api("/v1/metrics");
    expect(res.status).toBe(200);
    const summary = await res.json<MetricsSummary>();
    expect(Object.keys(summary.counters).sort()).toEqual([...COUNTERS].sort());
    for (const name of COUNTERS) expect(typeof summary.counters[name]).toBe("number");
    // exactly what happened: two fired, two succeeded, nothing failed
    expect(summary.counters.fired_total! - before.counters.fired_total!).toBe(2);
    expect(summary.counters.succeeded_total! - before.counters.succeeded_total!).toBe(2);
    expect(summary.counters.failed_attempts_total! - before.counters.failed_attempts_total!).toBe(0);
    // the buckets meter what they cost
    for (const meter of METERS) expect(summary.counters[meter]!, meter).toBeGreaterThan(before.counters[meter]!);

    const lag = summary.fire_lag_ms;
    expect(lag.count - before.fire_lag_ms.count).toBe(2);
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
      expect(line).toMatch(/^scheduler_[a-z0-9_]+(\{[a-z]+="[^"]*"(,[a-z]+="[^"]*")*\})? \d+$/);
    }

    const json = await metrics();
    const sample = (series: string) => Number(lines.find((l) => l.startsWith(`${series} `))?.split(" ")[1]);
    expect(json.dead_total_by_reason.permanent).toBeGreaterThanOrEqual(1);
    for (const name of COUNTERS.filter((n) => n !== "dead_total" && !METERS.includes(n))) {
      expect(sample(`scheduler_${name}`), name).toBe(json.counters[name]);
    }
    expect(sample('scheduler_dead_total{reason="permanent"}')).toBe(json.dead_total_by_reason.permanent);
    // D1 rows by shard, a series each (a meter: it moves between two reads), adding up to the JSON counter
    const d1Shards = Object.entries(json.d1_rows_written_total_by_shard);
    expect(d1Shards.length).toBeGreaterThan(0);
    for (const [shard] of d1Shards) expect(sample(`scheduler_d1_rows_written_total{shard="${shard}"}`)).toBeGreaterThan(0);
    expect(d1Shards.reduce((sum, [, v]) => sum + v, 0)).toBe(json.counters.d1_rows_written_total);
    expect(sample('scheduler_fire_lag_ms_bucket{le="+Inf"}')).toBe(json.fire_lag_ms.count);
    expect(sample("scheduler_fire_lag_ms_count")).toBe(json.fire_lag_ms.count);
    // cumulative buckets: each le line is the running sum of the JSON buckets
    let cumulative = 0;
    for (const b of json.fire_lag_ms.buckets) {
      cumulative += b.count;
      expect(sample(`scheduler_fire_lag_ms_bucket{le="${b.le}"}`), b.le).toBe(cumulative);
    }
  });

  it("scopes metrics to the tenant of the API key", async () => {
    const acmeBefore = await metrics(KEYS.acme);
    const globexBefore = await metrics(KEYS.globex);
    await runOnce(uniquePath(), KEYS.globex);
    await runOnce(uniquePath("fail/404"), KEYS.acme);
    const acme = await metrics(KEYS.acme);
    const globex = await metrics(KEYS.globex);

    const delta = (after: MetricsSummary, before: MetricsSummary, name: string) => after.counters[name]! - before.counters[name]!;
    expect(["fired_total", "succeeded_total", "failed_attempts_total", "dead_total"].map((n) => delta(globex, globexBefore, n))).toEqual([
      1, 1, 0, 0,
    ]);
    expect(globex.fire_lag_ms.count - globexBefore.fire_lag_ms.count).toBe(1);
    expect(["fired_total", "succeeded_total", "failed_attempts_total", "dead_total"].map((n) => delta(acme, acmeBefore, n))).toEqual([
      1, 0, 1, 1,
    ]);
    expect(acme.dead_total_by_reason.permanent! - (acmeBefore.dead_total_by_reason.permanent ?? 0)).toBe(1);
    expect(acme.fire_lag_ms.count - acmeBefore.fire_lag_ms.count).toBe(1);
    // the tenant's second key sees the same tenant
    expect(tenantOnly(await metrics(KEYS.acme2))).toEqual(tenantOnly(acme));
  });
});

// ---------------------------------------------------------------------------------------------
// the census (invariant 4)

const TERMINAL = ["succeeded", "dead", "canceled"];

interface Census {
  /** execution id -> its one state */
  state: Map<string, string>;
  /** execution id -> where that state was read: "d1" or "bucket" */
  source: Map<string, "d1" | "bucket">;
  tenant: Map<string, string>;
  /** attempts finished (D1's count when terminal there, else the bucket's) */
  attempts: Map<string, number>;
  pending: number;
  d1Terminal: number;
  bucketTotal: number;
}

/** Reads D1 and every bucket and puts each accepted execution in exactly one place. */
async function census(): Promise<Census> {
  const rows = await allShards<{
    id: string;
    tenant: string;
    bucket: number;
    status: string;
    cron: string | null;
    run_status: string | null;
    attempts: number;
  }>("SELECT id, tenant, bucket, status, cron, run_status, attempts FROM jobs");
  // invariant 1: every 201 of this file is a D1 row (storage is this file's own)
  expect(rows).toHaveLength(accepted);

  // the buckets: their durable rows, what they hold live, and counts()
  const held = new Map<string, { bucket: number; view: LiveExecution }>();
  let bucketTotal = 0;
  for (let k = 0; k < BUCKETS; k++) {
    const stub = bucketStub(k);
    const ids = (await bucketSql<{ id: string }>(stub, "SELECT id FROM executions")).map((r) => r.id);
    const views = await stub.inspect({ executionIds: ids });
    expect(views.map((v) => v.executionId).sort(), `bucket ${k} holds each of its rows`).toEqual([...ids].sort());
    const byStatus: Record<string, number> = {};
    for (const v of views) {
      expect(held.has(v.executionId), `${v.executionId} is in two buckets`).toBe(false);
      held.set(v.executionId, { bucket: k, view: v });
      byStatus[v.status] = (byStatus[v.status] ?? 0) + 1;
    }
    const counts = await stub.counts();
    expect(counts.byStatus, `bucket ${k}: counts() agrees with what it holds`).toEqual(byStatus);
    bucketTotal += Object.values(counts.byStatus).reduce((a, b) => a + b, 0);
  }

  const c: Census = {
    state: new Map(),
    source: new Map(),
    tenant: new Map(),
    attempts: new Map(),
    pending: 0,
    d1Terminal: 0,
    bucketTotal,
  };
  const jobOf = new Set<string>();
  for (const r of rows) {
    expect(r.cron, "this file creates one-off jobs only").toBeNull();
    const id = oneOffExecutionId(r.id);
    jobOf.add(id);
    const inBucket = held.get(id);
    if (inBucket) expect(inBucket.bucket, `${id} is held by its own bucket`).toBe(r.bucket);
    // D1's say: terminal on the row, canceled before any hand-off, or pending (active, not held)
    let d1: string | null = null;
    if (r.run_status !== null && TERMINAL.includes(r.run_status)) d1 = r.run_status;
    else if (!inBucket && r.status === "canceled") d1 = "canceled";
    else if (!inBucket && r.status === "active") d1 = "pending";
    const places = (d1 === null ? 0 : 1) + (inBucket ? 1 : 0);
    expect(places, `${id} (${r.status}/${r.run_status} in D1, ${inBucket?.view.status ?? "not"} in a bucket) is in ${places} places`).toBe(
      1,
    );
    c.tenant.set(id, r.tenant);
    if (inBucket) {
      c.state.set(id, inBucket.view.status);
      c.source.set(id, "bucket");
      c.attempts.set(id, inBucket.view.attempts);
    } else {
      c.state.set(id, d1!);
      c.source.set(id, "d1");
      c.attempts.set(id, r.attempts);
      if (d1 === "pending") c.pending += 1;
      else c.d1Terminal += 1;
    }
  }
  for (const id of held.keys()) expect(jobOf.has(id), `${id} is in a bucket but has no job in D1`).toBe(true);
  // the counts add up: every accepted execution is counted once
  expect(c.pending + c.d1Terminal + c.bucketTotal).toBe(accepted);
  return c;
}

/**
 * What a tenant's counters must read, from the census: each dispatch fired once and was claimed
 * at most once; each claim is an attempt (finished, or running now); each finished attempt
 * succeeded or failed; each failure was retried unless it killed the execution.
 */
function expectedCounters(c: Census, tenant: string) {
  const mine = [...c.state].filter(([id]) => c.tenant.get(id) === tenant);
  const count = (state: string) => mine.filter(([, s]) => s === state).length;
  const finished = mine.reduce((n, [id]) => n + c.attempts.get(id)!, 0);
  const started = finished + count("running");
  const failed = finished - count("succeeded");
  return {
    fired_total: started + count("dispatched"),
    succeeded_total: count("succeeded"),
    failed_attempts_total: failed,
    retries_total: failed - count("dead"),
    dead_total: count("dead"),
    canceled_total: count("canceled"), // whatever the distance: held or still waiting in D1
    lag_count: started,
  };
}

async function expectCountersAddUp(c: Census): Promise<void> {
  for (const [tenant, key] of [
    ["acme", KEYS.acme],
    ["globex", KEYS.globex],
  ] as const) {
    const shown = await metrics(key);
    const want = expectedCounters(c, tenant);
    const { lag_count, ...counters } = want;
    expect(Object.fromEntries(Object.keys(counters).map((n) => [n, shown.counters[n]])), `${tenant}'s counters`).toEqual(counters);
    expect(shown.fire_lag_ms.count, `${tenant}'s lag samples`).toBe(lag_count);
    // nothing this file did is a duplicate, a stale report, a lost dispatch or a recovery
    for (const n of [
      "duplicates_suppressed_total",
      "stale_lease_rejects_total",
      "lease_expired_total",
      "redispatch_total",
      "dispatch_errors_total",
    ]) {
      expect(shown.counters[n], `${tenant} ${n}`).toBe(0);
    }
  }
}

describe("accounting", () => {
  it("holds every accepted execution in exactly one state, and the counts add up (invariant 4)", async () => {
    const url = () => `${receiverUrl()}${uniquePath()}`;
    const expected = new Map<string, [state: string, source: "d1" | "bucket"]>(); // before the flush

    const succeeded = await runOnce(uniquePath());
    expected.set(succeeded.exe.id, ["succeeded", "d1"]);
    const dead = await runOnce(uniquePath("fail/404"));
    expected.set(dead.exe.id, ["dead", "d1"]);
    const retrying = await runOnce(uniquePath("fail/503"), KEYS.acme, {
      maxAttempts: 3,
      initialDelayMs: 3_600_000,
      maxDelayMs: 7_200_000,
      jitter: 0,
    });
    expected.set(retrying.exe.id, ["scheduled", "bucket"]);
    expect(await retrying.view()).toMatchObject({ status: "scheduled", attempts: 1 });

    const future = await newExecution({ target: { url: url() }, delay: "150s" });
    expected.set(future.exe.id, ["scheduled", "bucket"]);
    const pending = await newExecution({ target: { url: url() }, delay: "10m" }); // beyond the 3 min lookahead
    expected.set(pending.exe.id, ["pending", "d1"]);
    for (const delay of ["10m", "1h", "30d"]) {
      const canceledPending = await newExecution({ target: { url: url() }, delay });
      expect((await api(`/v1/jobs/${canceledPending.job.id}`, { method: "DELETE" })).status).toBe(200);
      expected.set(canceledPending.exe.id, ["canceled", "d1"]);
    }

    const dispatched = await newExecution({ target: { url: url() } });
    await dispatchNow(dispatched);
    expected.set(dispatched.exe.id, ["dispatched", "bucket"]);
    const running = await newExecution({ target: { url: url() } });
    const runningMessage = await dispatchNow(running);
    expect((await running.stub.claim([{ executionId: running.exe.id, dueAt: runningMessage.dueAt }]))[0]?.ok).toBe(true);
    expected.set(running.exe.id, ["running", "bucket"]);
    // finished after the last alarm: outcomes in bucket memory, on their way to D1
    const closing = await newExecution({ target: { url: url() } });
    const closingMessage = await dispatchNow(closing);
    const canceled = await newExecution({ target: { url: url() }, delay: "150s" });
    expect((await api(`/v1/jobs/${canceled.job.id}`, { method: "DELETE" })).status).toBe(200);
    expected.set(canceled.exe.id, ["canceled", "bucket"]);
    expect((await fire([closingMessage])).explicitAcks).toEqual(["m0"]);
    expected.set(closing.exe.id, ["succeeded", "bucket"]);
    expect(await jobRow(closing.job.id)).toMatchObject({ status: "active", run_status: null });
    expect(await jobRow(canceled.job.id)).toMatchObject({ status: "canceled", run_status: null });

    const before = await census();
    for (const [id, [state, source]] of expected) expect([before.state.get(id), before.source.get(id)], id).toEqual([state, source]);
    await expectCountersAddUp(before);

    // the flush moves the finished outcomes to D1: each leaves its bucket as it lands there
    await flushAll();
    const after = await census();
    for (const id of [closing.exe.id, canceled.exe.id]) expected.set(id, [expected.get(id)![0], "d1"]);
    for (const [id, [state, source]] of expected) expect([after.state.get(id), after.source.get(id)], id).toEqual([state, source]);
    expect(after.bucketTotal).toBe(before.bucketTotal - 2);
    expect(after.d1Terminal).toBe(before.d1Terminal + 2);
    await expectCountersAddUp(after);
  });
});
