/**
 * The cron scanner's sync pass (failure row "hand-off to the bucket fails after the D1 insert"):
 * a job whose hand-off failed is durable in D1 (the 201 stands) and the scan hands it to its
 * bucket, counted in scanner_recovered_total; pulling is idempotent (twice, or concurrently,
 * schedules nothing twice), brings only active jobs due within the lookahead (overdue included),
 * re-arms a bucket's alarm, and reaches every bucket a job names even after BUCKETS was lowered.
 *
 * The hand-off failure is injected where it happens: the test shares `env` with the Worker, so a
 * spy on env.BUCKET.getByName gives the API a stub whose applyJobs rejects.
 *
 * Time: one file-wide virtual clock 10 minutes ahead of the real one (no bucket alarm fires on
 * its own); fire-queue sends are captured for the whole file and fed to the consumer by the test.
 */
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, onTestFinished, vi } from "vitest";
import type { FireMessage } from "../../src/bucket/protocol";
import { newId, oneOffExecutionId } from "../../src/core/id";
import {
  alarmOf,
  api,
  bucketRow,
  bucketSql,
  bucketStub,
  CONFIG,
  captureFiresForFile,
  counters,
  type Execution,
  fileClock,
  fire,
  jobRow,
  live,
  newExecution,
  received,
  receiverUrl,
  runAlarm,
  runScan,
  takeSent,
  uniquePath,
} from "./helpers";

const BUCKETS = CONFIG.BUCKETS; // 4 in vitest.config.ts
const LOOKAHEAD_MS = CONFIG.LOOKAHEAD_MS;
const QUANTUM_MS = CONFIG.ALARM_QUANTUM_MS;
const quantized = (at: number) => Math.ceil(at / QUANTUM_MS) * QUANTUM_MS;

const clock = fileClock(10 * 60_000);
const sent = captureFiresForFile();

const messagesOf = (executionId: string): FireMessage[] => takeSent(sent, executionId);

/**
 * Until `restore` (or the test's end), every bucket stub the Worker gets rejects applyJobs: the
 * hand-off (and a change's apply) fails after the D1 write. Other RPCs go through.
 */
function failHandOff(): { restore: () => void; failures: () => number } {
  let failures = 0;
  const getByName = env.BUCKET.getByName.bind(env.BUCKET);
  const spy = vi.spyOn(env.BUCKET, "getByName").mockImplementation((name: string) => {
    const stub = getByName(name);
    return new Proxy(stub, {
      get(target, prop) {
        if (prop === "applyJobs") {
          return async () => {
            failures += 1;
            throw new Error("injected: the bucket is unreachable");
          };
        }
        return Reflect.get(target, prop) as unknown;
      },
    });
  });
  onTestFinished(() => spy.mockRestore());
  return { restore: () => spy.mockRestore(), failures: () => failures };
}

/** Creates a one-off job whose hand-off fails: 201, durable in D1, not in its bucket. */
async function strandedJob(fields: Record<string, unknown>, kind = "ok"): Promise<Execution & { path: string }> {
  const path = uniquePath(kind);
  const injected = failHandOff();
  const created = await newExecution({ target: { url: `${receiverUrl()}${path}` }, ...fields });
  expect(injected.failures()).toBe(1);
  injected.restore();
  const e = { ...created, stub: bucketStub(created.exe.bucket) }; // a stub of the bucket itself, not the injected one
  onTestFinished(async () => {
    await api(`/v1/jobs/${e.job.id}`, { method: "DELETE" });
  });
  expect(await jobRow(e.job.id)).toMatchObject({ status: "active", version: 1, next_run_at: e.exe.due_at });
  expect(await live(e.stub, e.exe.id)).toBeUndefined();
  return { ...e, path };
}

async function recovered(): Promise<number> {
  return (await counters()).scanner_recovered_total ?? 0;
}

/** The bucket's durable rows of a job. */
async function rowsOfJob(e: Execution): Promise<Record<string, SqlStorageValue>[]> {
  return bucketSql(e.stub, "SELECT id, due_at FROM executions WHERE job_id = ?", e.job.id);
}

describe("the scanner's sync pass", () => {
  it("hands a job whose hand-off failed after the D1 insert to its bucket, counts it, and the job runs (failure row: hand-off fails after the D1 insert)", async () => {
    const before = await recovered();
    const e = await strandedJob({ delay: "1m" });
    // the user was told 201 and sees the job pending
    const shown = (await (await api(`/v1/executions/${e.exe.id}`)).json()) as { status: string };
    expect(shown.status).toBe("pending");

    await runScan();

    expect(await live(e.stub, e.exe.id)).toMatchObject({ status: "scheduled", dueAt: e.exe.due_at, attempts: 0, jobId: e.job.id });
    expect(await rowsOfJob(e)).toEqual([{ id: e.exe.id, due_at: e.exe.due_at }]);
    const alarm = await alarmOf(e.stub);
    expect(alarm).not.toBeNull();
    expect(alarm!).toBeLessThanOrEqual(quantized(e.exe.due_at));
    expect((await recovered()) - before).toBe(1);

    // and it runs like any other job
    clock.travelTo(e.exe.due_at);
    expect(await runDurableObjectAlarm(e.stub)).toBe(true);
    const messages = messagesOf(e.exe.id);
    expect(messages).toEqual([e.message]);
    expect((await fire(messages)).explicitAcks).toEqual(["m0"]);
    expect(await received(e.path)).toHaveLength(1);
    await clock.flush(e.stub);
    expect(await jobRow(e.job.id)).toMatchObject({ status: "completed", run_status: "succeeded", attempts: 1 });
  });

  it("converges a change whose apply failed (answered 202) and marks it synced", async () => {
    const e = await newExecution({ target: { url: `${receiverUrl()}${uniquePath()}` }, delay: "1m" });
    const injected = failHandOff();
    const res = await api(`/v1/jobs/${e.job.id}`, { method: "DELETE" });
    expect(res.status).toBe(202);
    injected.restore();
    expect(await jobRow(e.job.id)).toMatchObject({ status: "canceled", version: 2, synced: 0 });
    expect(await live(e.stub, e.exe.id)).toMatchObject({ status: "scheduled" });

    await runScan();
    expect(await live(e.stub, e.exe.id)).toMatchObject({ status: "canceled" });
    expect(await jobRow(e.job.id)).toMatchObject({ status: "canceled", version: 2, synced: 1 });
    clock.travelTo(e.exe.due_at);
    await runDurableObjectAlarm(e.stub);
    expect(messagesOf(e.exe.id)).toEqual([]);
    await clock.flush(e.stub);
    expect(await jobRow(e.job.id)).toMatchObject({ status: "canceled", run_status: "canceled" });
  });

  it("pulls an overdue job too (a missed scan heals itself)", async () => {
    const before = await recovered();
    const e = await strandedJob({ delay: "30s" });
    clock.advance(90_000); // a minute overdue
    await runScan();
    expect(await live(e.stub, e.exe.id)).toMatchObject({ status: "scheduled", dueAt: e.exe.due_at });
    expect((await recovered()) - before).toBe(1);
    // the alarm the scan armed sends it at once
    const alarm = await alarmOf(e.stub);
    expect(alarm).not.toBeNull();
    expect(alarm!).toBeLessThanOrEqual(quantized(clock.at));
    expect(await runDurableObjectAlarm(e.stub)).toBe(true);
    expect(messagesOf(e.exe.id)).toEqual([e.message]);
  });

  it("schedules nothing twice when scans run again or concurrently, and counts the pull once", async () => {
    const before = await recovered();
    const e = await strandedJob({ delay: "1m" });

    await Promise.all([runScan(), runScan()]);
    await runScan();
    expect(await rowsOfJob(e)).toEqual([{ id: e.exe.id, due_at: e.exe.due_at }]);
    expect(await live(e.stub, e.exe.id)).toMatchObject({ status: "scheduled", attempts: 0 });
    expect((await recovered()) - before).toBe(1);

    // in flight: a scan neither resets nor duplicates it
    clock.travelTo(e.exe.due_at);
    expect(await runDurableObjectAlarm(e.stub)).toBe(true);
    const messages = messagesOf(e.exe.id);
    expect(messages).toHaveLength(1);
    await Promise.all([runScan(), runScan()]);
    expect(await live(e.stub, e.exe.id)).toMatchObject({ status: "dispatched" });
    await runDurableObjectAlarm(e.stub);
    expect(messagesOf(e.exe.id)).toEqual([]);
    expect((await fire(messages)).explicitAcks).toEqual(["m0"]);
    expect(await received(e.path)).toHaveLength(1);
    expect((await recovered()) - before).toBe(1);
  });

  it("does not run a job again when a scan reads D1 while its outcome is on the way there", async () => {
    const e = await strandedJob({ delay: "1m" });
    await runScan();
    clock.travelTo(e.exe.due_at);
    expect(await runDurableObjectAlarm(e.stub)).toBe(true);
    expect((await fire(messagesOf(e.exe.id))).explicitAcks).toEqual(["m0"]);
    expect(await live(e.stub, e.exe.id)).toMatchObject({ status: "succeeded" });
    const before = await recovered();

    // D1 still says active and due: the scan brings the same version again, before the flush
    expect(await jobRow(e.job.id)).toMatchObject({ status: "active", version: 1, run_status: null });
    await runScan();
    await clock.flush(e.stub);
    expect(await jobRow(e.job.id)).toMatchObject({ status: "completed", run_status: "succeeded", attempts: 1 });

    // no second execution is ever sent, and nothing of it is left in the bucket
    for (let i = 0; i < 3; i++) {
      clock.advance(10_000);
      await runAlarm(e.stub);
      const again = messagesOf(e.exe.id);
      if (again.length > 0) await fire(again);
    }
    expect(await received(e.path)).toHaveLength(1);
    expect(await rowsOfJob(e)).toEqual([]);
    expect(await live(e.stub, e.exe.id)).toBeUndefined();
    expect((await recovered()) - before).toBe(0);
  });

  it("pulls only what is due within the lookahead: a job at the horizon comes, one a millisecond later stays in D1 until near", async () => {
    const before = await recovered();
    const now = clock.at;
    const atHorizon = await strandedJob({ runAt: now + LOOKAHEAD_MS });
    const beyond = await newExecution({ target: { url: `${receiverUrl()}${uniquePath()}` }, runAt: now + LOOKAHEAD_MS + 1 });
    onTestFinished(async () => {
      await api(`/v1/jobs/${beyond.job.id}`, { method: "DELETE" });
    });
    expect(await live(beyond.stub, beyond.exe.id)).toBeUndefined(); // far: create does not hand it off

    await runScan();
    expect(await live(atHorizon.stub, atHorizon.exe.id)).toMatchObject({ status: "scheduled" });
    expect(await live(beyond.stub, beyond.exe.id)).toBeUndefined();
    expect(await bucketRow(beyond.stub, beyond.exe.id)).toBeUndefined();
    expect((await recovered()) - before).toBe(1);

    clock.advance(1);
    await runScan();
    expect(await live(beyond.stub, beyond.exe.id)).toMatchObject({ status: "scheduled", dueAt: now + LOOKAHEAD_MS + 1 });
    expect((await recovered()) - before).toBe(2);
  });

  it("does not pull a canceled job's execution whose hand-off and cancel both failed", async () => {
    const before = await recovered();
    const e = await strandedJob({ delay: "1m" });
    const injected = failHandOff();
    expect((await api(`/v1/jobs/${e.job.id}`, { method: "DELETE" })).status).toBe(202);
    injected.restore();
    await runScan();
    expect(await live(e.stub, e.exe.id)).toBeUndefined();
    expect(await rowsOfJob(e)).toEqual([]);
    expect(await jobRow(e.job.id)).toMatchObject({ status: "canceled", synced: 1 });
    expect((await recovered()) - before).toBe(0);
    clock.travelTo(e.exe.due_at);
    await runDurableObjectAlarm(e.stub);
    expect(messagesOf(e.exe.id)).toEqual([]);
  });

  it("re-arms a bucket whose alarm was lost (the safety net for a dropped alarm)", async () => {
    const e = await newExecution({ target: { url: `${receiverUrl()}${uniquePath()}` }, delay: "1m" });
    onTestFinished(async () => {
      await api(`/v1/jobs/${e.job.id}`, { method: "DELETE" });
    });
    expect(await alarmOf(e.stub)).not.toBeNull();
    await runInDurableObject(e.stub, (_instance, state) => state.storage.deleteAlarm());
    expect(await alarmOf(e.stub)).toBeNull();
    await runScan();
    const alarm = await alarmOf(e.stub);
    expect(alarm).not.toBeNull();
    expect(alarm!).toBeLessThanOrEqual(quantized(e.exe.due_at));
  });

  it("never strands a job of a bucket beyond BUCKETS (BUCKETS was lowered): the scan pulls it and it is delivered", async () => {
    const bucket = BUCKETS + 1;
    const stub = bucketStub(bucket);
    const path = uniquePath();
    const now = clock.at;
    const jobId = newId("job", now, crypto.getRandomValues(new Uint8Array(16)));
    const executionId = oneOffExecutionId(jobId);
    const dueAt = now + 60_000;
    const spec = {
      target: { url: `${receiverUrl()}${path}`, method: "POST", headers: {}, body: null },
      timeoutMs: 30_000,
      retry: { maxAttempts: 5, initialDelayMs: 1_000, maxDelayMs: 300_000, factor: 2, jitter: 0 },
      metadata: null,
      schedule: null,
    };
    // as created while BUCKETS was higher, its hand-off lost
    await env.DB.prepare(
      `INSERT INTO jobs (tenant, id, name, bucket, status, version, synced, spec, next_run_at, created_at, updated_at, fired, attempts)
       VALUES ('acme', ?, 'lowered', ?, 'active', 1, 1, ?, ?, ?, ?, 0, 0)`,
    )
      .bind(jobId, bucket, JSON.stringify(spec), dueAt, now, now)
      .run();

    await runScan();
    expect(await live(stub, executionId)).toMatchObject({ status: "scheduled", dueAt, jobId });

    clock.travelTo(dueAt);
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    const messages = messagesOf(executionId);
    expect(messages).toEqual([{ v: 1, executionId, bucket, tenant: "acme", dueAt }]);
    const result = await fire(messages);
    expect(result.explicitAcks).toEqual(["m0"]);
    expect(await received(path)).toHaveLength(1);
    await clock.flush(stub);
    expect(await jobRow(jobId)).toMatchObject({ status: "completed", run_status: "succeeded", attempts: 1 });
  });
});
