/**
 * Retries through the real fire consumer and a loopback target: invariant 6 (backoff delays,
 * Retry-After up to the cap, dead after maxAttempts and kept for redrive, permanent 4xx dead at
 * once), the failure row "target keeps failing" (dead_total, retries_total, visible in GET
 * /v1/dlq) and "worker crashes mid-handler" (an expired lease is a failed attempt: retried, or
 * dead when it was the last).
 *
 * Revision 2 (docs/data-path.md): the bucket holds the execution (its attempt log included) until
 * it is terminal, then writes the outcome once to the one-off job's D1 row (run_status, attempts,
 * attempt_log, ...) at its next flush. Attempts are read live (stub.inspect) while it retries and
 * from the job row's attempt_log after the flush. The delay of a retry is the execution's new due
 * time minus the failed attempt's finishedAt: both are the same (virtual) clock reading.
 *
 * Time: one file-wide virtual clock, HEAD_START_MS ahead of the real one, moved only by tests;
 * every alarm a bucket arms lies ahead of the real clock, so tests run them (runAlarm). The fire
 * queue is captured for the whole file: the consumer runs only when a test calls fire().
 */
import { afterEach, describe, expect, it } from "vitest";
import type { AttemptRecord, ClaimResult } from "../../src/bucket/protocol";
import {
  api,
  captureFiresForFile,
  counters,
  dispatchOf,
  type Execution,
  fileClock,
  fire,
  jobRow,
  newExecution,
  received,
  receiverUrl,
  runAlarm,
  uniquePath,
} from "./helpers";

const HEAD_START_MS = 10 * 60_000;
const clock = fileClock(HEAD_START_MS);
const sent = captureFiresForFile();

type Lease = Extract<ClaimResult, { ok: true }>;

const dispatch = dispatchOf(clock, sent);

/** One attempt: at its due time the alarm dispatches it and the consumer delivers it (and acks the message). */
async function attemptOnce(e: Execution): Promise<void> {
  const result = await fire([await dispatch(e)]);
  expect(result.explicitAcks).toEqual(["m0"]);
  expect(result.retryMessages).toEqual([]);
}

/** A worker that claimed the execution and then crashed: it never reports. */
async function claimAndCrash(e: Execution): Promise<Lease> {
  const message = await dispatch(e);
  const [lease] = await e.stub.claim([{ executionId: message.executionId, dueAt: message.dueAt }]);
  if (!lease?.ok) throw new Error(`claim refused: ${JSON.stringify(lease)}`);
  return lease;
}

/** The delay the bucket chose after the latest failed attempt (live view). */
async function lastRetryDelayMs(e: Execution): Promise<number> {
  const view = (await e.view())!;
  expect(view.status).toBe("scheduled");
  const last = view.attemptLog[view.attemptLog.length - 1]!;
  expect(last.attempt).toBe(view.attempts);
  return view.dueAt - last.finishedAt!;
}

/** The one-off job's execution as D1 holds it once terminal (after the bucket's flush). */
async function flushed(e: Execution) {
  await clock.flush(e.stub);
  expect(await e.view()).toBeUndefined(); // the bucket let it go: D1 has it
  const row = (await jobRow(e.job.id))!;
  const log = row.attempt_log ? (JSON.parse(row.attempt_log) as AttemptRecord[]) : [];
  return { row, log };
}

const cancel = (e: Execution) => api(`/v1/jobs/${e.job.id}`, { method: "DELETE" });

function delta(before: Record<string, number>, after: Record<string, number>, name: string): number {
  return (after[name] ?? 0) - (before[name] ?? 0);
}

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
      expect(await e.view()).toMatchObject({ status: "scheduled", attempts: attempt, lastHttpStatus: 503 });
      delays.push(await lastRetryDelayMs(e));
    }
    expect(delays).toEqual([1000, 2000, 3000]);

    await attemptOnce(e);
    expect(await e.view()).toMatchObject({ status: "dead", attempts: 4 });
    const after = await counters();
    expect(delta(before, after, "retries_total")).toBe(3);
    expect(delta(before, after, "failed_attempts_total")).toBe(4);
    expect(delta(before, after, "dead_total")).toBe(1);

    // the job row has the outcome and every attempt, each due when the backoff said
    const { row, log } = await flushed(e);
    expect(row).toMatchObject({
      status: "completed",
      run_status: "dead",
      attempts: 4,
      dead_reason: "attempts_exhausted",
      last_http_status: 503,
    });
    expect(log.map((a) => [a.attempt, a.outcome, a.httpStatus])).toEqual([
      [1, "retryable", 503],
      [2, "retryable", 503],
      [3, "retryable", 503],
      [4, "retryable", 503],
    ]);
    expect(log.slice(1).map((a, i) => a.dueAt - log[i]!.finishedAt!)).toEqual([1000, 2000, 3000]);
    expect(await received(new URL(e.job.target.url).pathname + new URL(e.job.target.url).search)).toHaveLength(4);
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
    expect(await e.view()).toMatchObject({ status: "dead", attempts: 1, lastHttpStatus: 404 });
    const after = await counters();
    expect(delta(before, after, "retries_total")).toBe(0);
    expect(delta(before, after, "dead_total")).toBe(1);

    const { row, log } = await flushed(e);
    expect(row).toMatchObject({ run_status: "dead", attempts: 1, dead_reason: "permanent", last_http_status: 404 });
    expect(log).toHaveLength(1);
    expect(log[0]).toMatchObject({ attempt: 1, outcome: "permanent", httpStatus: 404 });
  });

  it.each([500, 503, 408, 429])("reschedules HTTP %i with backoff (HTTP targets: 408, 429, 5xx are retryable)", async (status) => {
    const e = await newExecution({
      target: { url: `${receiverUrl()}${uniquePath(`fail/${status}`)}` },
      retry: { maxAttempts: 5, initialDelayMs: 1000, jitter: 0 },
    });
    await attemptOnce(e);
    const view = (await e.view())!;
    expect(view).toMatchObject({ status: "scheduled", attempts: 1, lastHttpStatus: status });
    expect(view.lastError).toContain(`HTTP ${status}`);
    expect(view.attemptLog).toHaveLength(1);
    expect(view.attemptLog[0]).toMatchObject({ attempt: 1, outcome: "retryable", httpStatus: status });
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
    const view = (await e.view())!;
    expect(view).toMatchObject({ status: "scheduled", attempts: 1, lastHttpStatus: null });
    expect(view.lastError).toMatch(/^network error/);
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
    expect(await e.view()).toMatchObject({ status: "scheduled", attempts: 1, lastHttpStatus: null, lastError: "timeout after 1000 ms" });
    expect(await lastRetryDelayMs(e)).toBe(1000);
    expect(await received(path)).toHaveLength(1);
    await cancel(e);
  });
});

describe("Retry-After", () => {
  // a Retry-After also slows the target's whole origin that long (README, Flow control): let it pass
  // so the next test's delivery to the same loopback origin starts at once
  afterEach(() => clock.advance(20_000));

  it("honours a target's Retry-After longer than the computed delay (invariant 6)", async () => {
    const e = await newExecution({
      target: { url: `${receiverUrl()}/fail/429?retryAfter=20&t=${crypto.randomUUID()}` },
      retry: { maxAttempts: 5, initialDelayMs: 1000, jitter: 0 },
    });
    await attemptOnce(e);
    expect((await e.view())?.status).toBe("scheduled");
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
    expect((await e.view())?.status).toBe("scheduled");
    await attemptOnce(e);
    const view = (await e.view())!;
    expect(view).toMatchObject({ status: "dead", attempts: 2, lastHttpStatus: 500 });
    expect(view.lastError).toContain("HTTP 500");
    const after = await api("/v1/metrics").then((r) => r.json<{ dead_total_by_reason: Record<string, number> }>());
    expect(delta(before.dead_total_by_reason, after.dead_total_by_reason, "attempts_exhausted")).toBe(1);

    const { row, log } = await flushed(e);
    expect(row).toMatchObject({
      status: "completed",
      run_status: "dead",
      attempts: 2,
      dead_reason: "attempts_exhausted",
      last_http_status: 500,
    });
    expect(row.last_error).toContain("HTTP 500");
    expect(log.map((a) => [a.attempt, a.outcome, a.httpStatus])).toEqual([
      [1, "retryable", 500],
      [2, "retryable", 500],
    ]);
    const dlq = await api("/v1/dlq?limit=200").then((r) =>
      r.json<{
        executions: { id: string; status: string; attempts: number; deadReason: string; lastError: string; lastHttpStatus: number }[];
      }>(),
    );
    const listed = dlq.executions.find((x) => x.id === e.exe.id);
    expect(listed).toMatchObject({ status: "dead", attempts: 2, deadReason: "attempts_exhausted", lastHttpStatus: 500 });
    expect(listed!.lastError).toContain("HTTP 500");
    const history = await api(`/v1/jobs/${e.job.id}/executions`).then((r) =>
      r.json<{ executions: { id: string; status: string; attempts: { attempt: number; outcome: string; httpStatus: number }[] }[] }>(),
    );
    expect(history.executions[0]).toMatchObject({ id: e.exe.id, status: "dead" });
    expect(history.executions[0]!.attempts.map((a) => [a.attempt, a.outcome, a.httpStatus])).toEqual([
      [1, "retryable", 500],
      [2, "retryable", 500],
    ]);
  });
});

describe("lease expiry", () => {
  it("retries an attempt whose lease expired with backoff, then delivers it (failure row: worker crashes mid-handler)", async () => {
    const path = uniquePath("ok");
    const e = await newExecution({
      target: { url: `${receiverUrl()}${path}` },
      retry: { maxAttempts: 3, initialDelayMs: 2000, jitter: 0 },
    });
    const lease = await claimAndCrash(e);
    const before = await counters();

    // the lease's deadline passes with no report and no heartbeat: the alarm expires it
    clock.travelTo(lease.leaseDeadlineAt);
    await runAlarm(e.stub);
    const view = (await e.view())!;
    expect(view).toMatchObject({ status: "scheduled", attempts: 1, lastHttpStatus: null });
    expect(view.attemptLog[0]).toMatchObject({ attempt: 1, outcome: "lease_expired", httpStatus: null });
    expect(view.lastError).toContain("lease expired");
    expect(await lastRetryDelayMs(e)).toBe(2000);
    const after = await counters();
    expect(delta(before, after, "lease_expired_total")).toBe(1);
    expect(delta(before, after, "retries_total")).toBe(1);
    expect(delta(before, after, "failed_attempts_total")).toBe(1);

    // the crashed worker's late report is a stale lease; the retry runs and succeeds
    const [late] = await e.stub.complete([
      { executionId: e.exe.id, token: lease.token, outcome: { kind: "succeeded", httpStatus: 200, excerpt: "" } },
    ]);
    expect(late).toMatchObject({ ok: false, code: "stale_lease" });
    await attemptOnce(e);
    expect(await e.view()).toMatchObject({ status: "succeeded", attempts: 2 });
    const { row, log } = await flushed(e);
    expect(row).toMatchObject({ status: "completed", run_status: "succeeded", attempts: 2, dead_reason: null });
    expect(log.map((a) => [a.attempt, a.outcome, a.httpStatus])).toEqual([
      [1, "lease_expired", null],
      [2, "succeeded", 200],
    ]);
    expect((await received(path)).map((r) => r.headers["x-scheduler-attempt"])).toEqual(["2"]);
  });

  it("ends dead (attempts_exhausted) when the lease of the last attempt expires (invariant 6)", async () => {
    const e = await newExecution({
      target: { url: `${receiverUrl()}${uniquePath("ok")}` },
      retry: { maxAttempts: 1, initialDelayMs: 1000, jitter: 0 },
    });
    const lease = await claimAndCrash(e);
    const before = await api("/v1/metrics").then((r) =>
      r.json<{ counters: Record<string, number>; dead_total_by_reason: Record<string, number> }>(),
    );
    clock.travelTo(lease.leaseDeadlineAt);
    await runAlarm(e.stub);
    // the same alarm may already have written the outcome to D1 (the clock moved past the flush delay)
    const shown = await api(`/v1/executions/${e.exe.id}`).then((r) =>
      r.json<{ status: string; attempts: number; deadReason: string | null }>(),
    );
    expect(shown).toMatchObject({ status: "dead", attempts: 1 });
    const after = await api("/v1/metrics").then((r) =>
      r.json<{ counters: Record<string, number>; dead_total_by_reason: Record<string, number> }>(),
    );
    expect(delta(before.counters, after.counters, "lease_expired_total")).toBe(1);
    expect(delta(before.counters, after.counters, "retries_total")).toBe(0);
    expect(delta(before.dead_total_by_reason, after.dead_total_by_reason, "attempts_exhausted")).toBe(1);

    const { row, log } = await flushed(e);
    expect(row).toMatchObject({
      status: "completed",
      run_status: "dead",
      attempts: 1,
      dead_reason: "attempts_exhausted",
      last_http_status: null,
    });
    expect(row.last_error).toContain("lease expired");
    expect(log).toEqual([expect.objectContaining({ attempt: 1, outcome: "lease_expired" })]);
    const dlq = await api("/v1/dlq?limit=200").then((r) => r.json<{ executions: { id: string; deadReason: string }[] }>());
    expect(dlq.executions.find((x) => x.id === e.exe.id)).toMatchObject({ deadReason: "attempts_exhausted" });
  });
});
