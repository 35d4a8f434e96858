/**
 * The cron scanner (failure row "hand-off to the bucket fails after the D1 insert"): rows left
 * pending in D1 are handed to their bucket by the scheduled handler, exactly once, only within
 * the lookahead and only for active jobs; the scan also re-arms a bucket whose alarm was lost.
 *
 * Rows are inserted straight into D1 to simulate a skipped hand-off. Due times are a minute or
 * more ahead (overdue only under a shifted clock), so no alarm fires while a test asserts;
 * captureFires() keeps any background alarm from sending to the real queue all the same.
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { bucketOf, timeBucketOf } from "../../src/core/bucketing";
import { newId } from "../../src/core/id";
import {
  alarmOf,
  bucketRow,
  bucketSql,
  bucketStub,
  captureFires,
  counters,
  executionOf,
  receiverUrl,
  runScan,
  uniquePath,
  withClockAhead,
} from "./helpers";

const BUCKETS = Number(env.BUCKETS); // 4 in vitest.config.ts
const LOOKAHEAD_MS = Number(env.LOOKAHEAD_MS ?? 180_000);
const SCAN_WINDOW_MS = Number(env.SCAN_WINDOW_MS ?? 60_000);
const QUANTUM_MS = 50;

/** A job and its first execution written to D1 the way create does, but never handed off. */
async function insertPending(dueAt: number, jobStatus: "active" | "paused" | "canceled" = "active") {
  const now = Date.now();
  const random = () => crypto.getRandomValues(new Uint8Array(16));
  const jobId = newId("job", now, random());
  const executionId = newId("exe", now, random());
  const bucket = bucketOf(jobId, BUCKETS);
  const spec = {
    target: { url: `${receiverUrl()}${uniquePath()}`, method: "POST", headers: {}, body: null },
    timeoutMs: 30_000,
    retry: { maxAttempts: 5, initialDelayMs: 1_000, maxDelayMs: 300_000, factor: 2, jitter: 0.2 },
    metadata: null,
    schedule: null,
  };
  await env.DB.batch([
    env.DB.prepare(
      `INSERT INTO jobs (id, tenant, name, status, bucket, spec, next_run_at, created_at, updated_at)
       VALUES (?, 'acme', 'scanner-test', ?, ?, ?, ?, ?, ?)`,
    ).bind(jobId, jobStatus, bucket, JSON.stringify(spec), dueAt, now, now),
    env.DB.prepare(
      `INSERT INTO executions (id, job_id, tenant, bucket, time_bucket, due_at, status, attempts, created_at, updated_at)
       VALUES (?, ?, 'acme', ?, ?, ?, 'pending', 0, ?, ?)`,
    ).bind(executionId, jobId, bucket, timeBucketOf(dueAt, SCAN_WINDOW_MS), dueAt, now, now),
  ]);
  return { jobId, executionId, bucket, dueAt, stub: bucketStub(bucket) };
}

describe("the scanner", () => {
  it("hands a pending row whose hand-off was skipped to its bucket and counts it (failure row: hand-off fails after the D1 insert)", async () => {
    captureFires();
    const before = await counters();
    const row = await insertPending(Date.now() + 60_000);

    await runScan();

    expect((await executionOf(row.jobId))!.status).toBe("scheduled");
    expect(await bucketRow(row.stub, row.executionId)).toMatchObject({ status: "scheduled", due_at: row.dueAt, job_id: row.jobId, attempt: 0 });
    const alarm = await alarmOf(row.stub);
    expect(alarm).not.toBeNull();
    expect(alarm!).toBeLessThanOrEqual(Math.ceil(row.dueAt / QUANTUM_MS) * QUANTUM_MS);
    const after = await counters();
    expect(after.scanner_recovered_total! - before.scanner_recovered_total!).toBe(1);
  });

  it("pulls overdue pending rows too (a missed scan heals itself)", async () => {
    captureFires();
    const before = await counters();
    const row = await insertPending(Date.now() + 30_000);
    // scan with the clock 90 s ahead: the row is a minute overdue, and the alarm the scan arms
    // lies 90 s ahead in real time, so it cannot dispatch the row in the background mid-test
    await withClockAhead(90_000, runScan);
    expect((await executionOf(row.jobId))!.status).toBe("scheduled");
    expect(await bucketRow(row.stub, row.executionId)).toMatchObject({ status: "scheduled", due_at: row.dueAt });
    expect((await counters()).scanner_recovered_total! - before.scanner_recovered_total!).toBe(1);
  });

  it("schedules nothing twice when the scan runs again, even if D1 still says pending", async () => {
    captureFires();
    const row = await insertPending(Date.now() + 60_000);
    await runScan();
    const first = await counters();
    expect(await bucketRow(row.stub, row.executionId)).toMatchObject({ status: "scheduled" });

    await runScan();
    // the bucket took it, but marking D1 failed: the next scan finds it pending again
    await env.DB.prepare("UPDATE executions SET status = 'pending' WHERE id = ?").bind(row.executionId).run();
    await bucketSql(row.stub, "UPDATE executions SET status = 'dispatched', dispatch_deadline_at = ? WHERE id = ?", Date.now() + 60_000, row.executionId);
    await runScan();

    expect(await bucketSql(row.stub, "SELECT id, status FROM executions WHERE job_id = ?", row.jobId)).toEqual([
      { id: row.executionId, status: "dispatched" },
    ]);
    expect((await executionOf(row.jobId))!.status).toBe("scheduled");
    expect((await counters()).scanner_recovered_total).toBe(first.scanner_recovered_total);
  });

  it("leaves a pending row due beyond the lookahead in D1", async () => {
    captureFires();
    const before = await counters();
    const far = await insertPending(Date.now() + LOOKAHEAD_MS + 5 * 60_000);
    await runScan();
    expect((await executionOf(far.jobId))!.status).toBe("pending");
    expect(await bucketRow(far.stub, far.executionId)).toBeUndefined();
    expect((await counters()).scanner_recovered_total).toBe(before.scanner_recovered_total);
  });

  it("does not pull the pending rows of a paused or canceled job", async () => {
    captureFires();
    const before = await counters();
    const paused = await insertPending(Date.now() + 60_000, "paused");
    const canceled = await insertPending(Date.now() + 60_000, "canceled");
    await runScan();
    for (const row of [paused, canceled]) {
      expect((await executionOf(row.jobId))!.status).toBe("pending");
      expect(await bucketRow(row.stub, row.executionId)).toBeUndefined();
    }
    expect((await counters()).scanner_recovered_total).toBe(before.scanner_recovered_total);
  });

  it("re-arms a bucket whose alarm was lost (the safety net for a dropped alarm)", async () => {
    captureFires();
    const row = await insertPending(Date.now() + 60_000);
    await runScan();
    await runInDurableObject(row.stub, (_instance, state) => state.storage.deleteAlarm());
    expect(await alarmOf(row.stub)).toBeNull();
    await runScan();
    const alarm = await alarmOf(row.stub);
    expect(alarm).not.toBeNull();
    expect(alarm!).toBeLessThanOrEqual(Math.ceil(row.dueAt / QUANTUM_MS) * QUANTUM_MS);
  });
});
