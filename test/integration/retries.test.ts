/**
 * Retries through the real fire consumer and a loopback target: invariant 6 (backoff delays,
 * Retry-After up to the cap, dead after maxAttempts and kept for redrive) and the failure row
 * "target keeps failing" (dead_total, retries_total, visible in GET /v1/dlq).
 *
 * The fire queue binding is replaced for the whole file (sends are captured, never consumed in
 * the background); each attempt is driven by backdating due_at, running the alarm and calling
 * the consumer with fire(). The delay of a retry is read exactly as due_at minus the failed
 * attempt's finished_at: both are the same bucket clock reading.
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Bucket } from "../../src/bucket/bucket";
import type { FireMessage } from "../../src/env";
import {
  api,
  bucketAttempts,
  bucketRow,
  bucketSql,
  bucketStub,
  counters,
  createJob,
  executionOf,
  fire,
  fireMessage,
  received,
  receiverUrl,
  uniquePath,
  captureFiresForFile,
  newExecution,
  runAlarm,
  type Execution,
} from "./helpers";

const sent = captureFiresForFile();



/** One attempt: make the execution due, let the alarm dispatch it, consume the message. */
async function attemptOnce(e: Execution): Promise<void> {
  await bucketSql(e.stub, "UPDATE executions SET due_at = ? WHERE id = ?", Date.now() - 1, e.exe.id);
  await runAlarm(e.stub);
  expect((await e.row()).status).toBe("dispatched");
  const result = await fire([e.message]);
  expect(result.explicitAcks).toEqual(["m0"]);
  expect(result.retryMessages).toEqual([]);
}

/** The delay the bucket chose after the latest failed attempt. */
async function lastRetryDelayMs(e: Execution): Promise<number> {
  const row = await e.row();
  const attempts = await bucketAttempts(e.stub, e.exe.id);
  const last = attempts[attempts.length - 1]!;
  expect(last.attempt).toBe(row.attempt);
  return row.due_at - (last.finished_at as number);
}

/** Flushes the bucket's mirror to D1 now (the mirror runs at most once per MIRROR_DELAY_MS). */
function mirrorNow(stub: ReturnType<typeof bucketStub>): Promise<void> {
  return runInDurableObject(stub, async (instance: Bucket) => {
    (instance as unknown as { lastMirrorAt: number }).lastMirrorAt = 0;
    await instance.alarm();
  });
}

const cancel = (e: Execution) => api(`/v1/jobs/${e.job.id}`, { method: "DELETE" });

describe("backoff", () => {
  it("waits 1 s, 2 s, then 3 s (capped) between attempts with jitter 0, then dies (invariant 6)", async () => {
    const e = await newExecution({
      target: { url: `${receiverUrl()}${uniquePath("fail/503")}` },
      retry: { maxAttempts: 4, initialDelayMs: 1000, factor: 2, maxDelayMs: 3000, jitter: 0 },
    });
    const before = await counters();
    const delays: number[] = [];
    for (let attempt = 1; attempt <= 3; attempt++) {
      await attemptOnce(e);
      expect(await e.row()).toMatchObject({ status: "scheduled", attempt });
      delays.push(await lastRetryDelayMs(e));
    }
    expect(delays).toEqual([1000, 2000, 3000]);

    await attemptOnce(e);
    expect(await e.row()).toMatchObject({ status: "dead", attempt: 4, dead_reason: "attempts_exhausted" });
    const after = await counters();
    expect(after.retries_total! - before.retries_total!).toBe(3);
    expect(after.failed_attempts_total! - before.failed_attempts_total!).toBe(4);
    expect(after.dead_total! - before.dead_total!).toBe(1);
  });

  it("keeps jittered delays within [delay * (1 - jitter), delay] (invariant 6)", async () => {
    const e = await newExecution({
      target: { url: `${receiverUrl()}${uniquePath("fail/500")}` },
      retry: { maxAttempts: 5, initialDelayMs: 10_000, factor: 2, maxDelayMs: 300_000, jitter: 0.5 },
    });
    await attemptOnce(e);
    const first = await lastRetryDelayMs(e);
    expect(first).toBeGreaterThanOrEqual(5_000);
    expect(first).toBeLessThanOrEqual(10_000);
    await attemptOnce(e);
    const second = await lastRetryDelayMs(e);
    expect(second).toBeGreaterThanOrEqual(10_000);
    expect(second).toBeLessThanOrEqual(20_000);
    await cancel(e);
  });
});

describe("failure classification", () => {
  it("kills a 404 at once with reason permanent, no retry (HTTP targets: other 4xx are permanent)", async () => {
    const e = await newExecution({
      target: { url: `${receiverUrl()}${uniquePath("fail/404")}` },
      retry: { maxAttempts: 5, initialDelayMs: 1000, jitter: 0 },
    });
    const before = await counters();
    await attemptOnce(e);
    expect(await e.row()).toMatchObject({ status: "dead", attempt: 1, dead_reason: "permanent", last_http_status: 404 });
    const [attempt] = await bucketAttempts(e.stub, e.exe.id);
    expect(attempt).toMatchObject({ outcome: "permanent", http_status: 404 });
    const after = await counters();
    expect(after.retries_total! - before.retries_total!).toBe(0);
    expect(after.dead_total! - before.dead_total!).toBe(1);
  });

  it.each([500, 503, 408, 429])("reschedules HTTP %i with backoff (HTTP targets: 408, 429, 5xx are retryable)", async (status) => {
    const e = await newExecution({
      target: { url: `${receiverUrl()}${uniquePath(`fail/${status}`)}` },
      retry: { maxAttempts: 5, initialDelayMs: 1000, jitter: 0 },
    });
    await attemptOnce(e);
    expect(await e.row()).toMatchObject({ status: "scheduled", attempt: 1, last_http_status: status });
    expect((await e.row()).last_error).toContain(`HTTP ${status}`);
    const [attempt] = await bucketAttempts(e.stub, e.exe.id);
    expect(attempt).toMatchObject({ outcome: "retryable", http_status: status });
    expect(await lastRetryDelayMs(e)).toBe(1000);
    await cancel(e);
  });

  it("reschedules after a network error (nothing listens on the port)", async () => {
    // port 1 on loopback: nothing listens there, so the connection is refused
    const e = await newExecution({
      target: { url: "http://127.0.0.1:1/unreachable" },
      retry: { maxAttempts: 5, initialDelayMs: 1000, jitter: 0 },
    });
    await attemptOnce(e);
    const row = await e.row();
    expect(row).toMatchObject({ status: "scheduled", attempt: 1, last_http_status: null });
    expect(row.last_error).toMatch(/^network error/);
    expect(await lastRetryDelayMs(e)).toBe(1000);
    await cancel(e);
  });

  it("reschedules after a timeout (target answers after 5 s, timeoutMs 1000)", async () => {
    const path = uniquePath("hang/5000");
    const e = await newExecution({
      target: { url: `${receiverUrl()}${path}` },
      timeoutMs: 1000,
      retry: { maxAttempts: 5, initialDelayMs: 1000, jitter: 0 },
    });
    await attemptOnce(e);
    const row = await e.row();
    expect(row).toMatchObject({ status: "scheduled", attempt: 1, last_http_status: null, last_error: "timeout after 1000 ms" });
    expect(await received(path)).toHaveLength(1);
    await cancel(e);
  });
});

describe("Retry-After", () => {
  it("honours a target's Retry-After longer than the computed delay (invariant 6)", async () => {
    const e = await newExecution({
      target: { url: `${receiverUrl()}/fail/429?retryAfter=20&t=${crypto.randomUUID()}` },
      retry: { maxAttempts: 5, initialDelayMs: 1000, jitter: 0 },
    });
    await attemptOnce(e);
    expect((await e.row()).status).toBe("scheduled");
    expect(await lastRetryDelayMs(e)).toBe(20_000);
    await cancel(e);
  });

  it("caps a target's Retry-After at maxDelayMs (invariant 6)", async () => {
    const e = await newExecution({
      target: { url: `${receiverUrl()}/fail/503?retryAfter=20&t=${crypto.randomUUID()}` },
      retry: { maxAttempts: 5, initialDelayMs: 1000, maxDelayMs: 5000, jitter: 0 },
    });
    await attemptOnce(e);
    expect(await lastRetryDelayMs(e)).toBe(5_000);
    await cancel(e);
  });
});

describe("attempts exhausted", () => {
  it("ends dead after maxAttempts with the last error kept, listed in GET /v1/dlq (invariant 6, failure row: target keeps failing)", async () => {
    const e = await newExecution({
      target: { url: `${receiverUrl()}${uniquePath("fail/500")}` },
      retry: { maxAttempts: 2, initialDelayMs: 1000, jitter: 0 },
    });
    const before = await api("/v1/metrics").then((r) => r.json<{ dead_total_by_reason: Record<string, number> }>());
    await attemptOnce(e);
    expect((await e.row()).status).toBe("scheduled");
    await attemptOnce(e);
    const row = await e.row();
    expect(row).toMatchObject({ status: "dead", attempt: 2, dead_reason: "attempts_exhausted", last_http_status: 500 });
    expect(row.last_error).toContain("HTTP 500");
    const after = await api("/v1/metrics").then((r) => r.json<{ dead_total_by_reason: Record<string, number> }>());
    expect((after.dead_total_by_reason.attempts_exhausted ?? 0) - (before.dead_total_by_reason.attempts_exhausted ?? 0)).toBe(1);

    await mirrorNow(e.stub);
    const d1 = await executionOf(e.job.id);
    expect(d1).toMatchObject({ status: "dead", attempts: 2, dead_reason: "attempts_exhausted", last_http_status: 500 });
    const dlq = await api("/v1/dlq?limit=200").then((r) =>
      r.json<{ executions: { id: string; status: string; attempts: number; deadReason: string; lastError: string; lastHttpStatus: number }[] }>(),
    );
    const listed = dlq.executions.find((x) => x.id === e.exe.id);
    expect(listed).toMatchObject({ status: "dead", attempts: 2, deadReason: "attempts_exhausted", lastHttpStatus: 500 });
    expect(listed!.lastError).toContain("HTTP 500");
    const history = await api(`/v1/jobs/${e.job.id}/executions`).then((r) =>
      r.json<{ executions: { attempts: { attempt: number; outcome: string; httpStatus: number }[] }[] }>(),
    );
    expect(history.executions[0]!.attempts.map((a) => [a.attempt, a.outcome, a.httpStatus])).toEqual([
      [1, "retryable", 500],
      [2, "retryable", 500],
    ]);
  });
});
