/**
 * Callbacks (issue 29 item 1, README "Callbacks"): a job's `callback` is told each execution that
 * succeeded and its `failureCallback` each that died. A callback is an execution of its own in
 * the parent's bucket, started when the parent's outcome is in D1: signed with Standard Webhooks
 * under its own webhook-id (stable across its retries), retried by the job's policy, dead after
 * its last attempt, and never the cause of another callback. The execution shows it as
 * `callbacks: [{kind, status, attempts}]`. A callback may be a handler Worker (its payload is the
 * outcome), and each occurrence of a recurring job has callbacks of its own.
 *
 * One file-wide virtual clock; fire-queue sends are captured and fed to the real consumer here.
 */
import { evictDurableObject, runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import type { ClaimResult } from "../../src/bucket/protocol";
import { occurrenceId } from "../../src/core/id";
import type { MetricsSummary } from "../../src/core/metrics";
import {
  api,
  bucketSql,
  bucketStub,
  callbackIdOf,
  captureFiresForFile,
  counters,
  createJob,
  dispatchNow,
  type Execution,
  executionJson,
  fileClock,
  fire,
  jobRow,
  newExecution,
  type Received,
  received,
  receiverUrl,
  uniquePath,
} from "./helpers";

const clock = fileClock(10 * 60_000);
const sent = captureFiresForFile();

const RETRY = { maxAttempts: 2, initialDelayMs: 1000, factor: 2, maxDelayMs: 1000, jitter: 0 };

/** One attempt of an execution held by `e`'s bucket: dispatched at its due time, delivered by the consumer. */
async function attempt(e: Execution, executionId = e.exe.id): Promise<void> {
  const message = await dispatchNow({ stub: e.stub, executionId }, clock, sent);
  const result = await fire([message]);
  expect(result.explicitAcks).toEqual(["m0"]);
}

async function metrics(): Promise<MetricsSummary> {
  const res = await api("/v1/metrics");
  expect(res.status).toBe(200);
  return (await res.json()) as MetricsSummary;
}

const redrive = (id: string) => api(`/v1/executions/${id}/redrive`, { method: "POST" });

function delta(before: Record<string, number>, after: Record<string, number>, name: string): number {
  return (after[name] ?? 0) - (before[name] ?? 0);
}

/** Verifies a request the receiver got with the integration project's WEBHOOK_SECRET; returns its JSON body. */
function verified(r: Received): Record<string, unknown> {
  const secret = (env as unknown as { WEBHOOK_SECRET: string }).WEBHOOK_SECRET;
  return new Webhook(secret).verify(r.body, r.headers) as Record<string, unknown>;
}

describe("callback (success)", () => {
  it("tells the callback of a success, signed under its own webhook-id, the same on its retry", async () => {
    const callbackPath = uniquePath("flaky/1"); // 503 once, then 200
    const e = await newExecution({
      target: { url: `${receiverUrl()}${uniquePath("ok")}` },
      callback: { url: `${receiverUrl()}${callbackPath}`, headers: { "x-team": "billing" } },
      retry: RETRY,
    });
    expect(e.job.callback).toEqual({ url: `${receiverUrl()}${callbackPath}`, headers: { "x-team": "billing" } });
    const before = await counters();
    await attempt(e);
    await clock.flush(e.stub); // the parent's outcome lands in D1; its callback starts
    expect(await executionJson(e.exe.id)).toMatchObject({
      status: "succeeded",
      callbacks: [{ kind: "success", status: "scheduled", attempts: 0 }],
    });

    const callbackId = await callbackIdOf(e.exe.id, "success");
    await attempt(e, callbackId); // 503: retried after 1 s
    await attempt(e, callbackId); // 200
    const requests = await received(callbackPath);
    expect(requests).toHaveLength(2);
    expect(requests.map((r) => r.headers["webhook-id"])).toEqual([callbackId, callbackId]);
    expect(requests.map((r) => r.headers["x-scheduler-attempt"])).toEqual(["1", "2"]);
    expect(requests[0]!.headers["x-team"]).toBe("billing");
    expect(requests[0]!.headers["content-type"]).toBe("application/json");
    const body = verified(requests[1]!);
    expect(body).toMatchObject({
      type: "execution.succeeded",
      executionId: e.exe.id,
      jobId: e.job.id,
      status: "succeeded",
      attempts: 1,
      httpStatus: 200,
      responseExcerpt: "ok",
      error: null,
    });
    expect(typeof body.finishedAt).toBe("string");
    expect(requests[1]!.body).toBe(requests[0]!.body); // the same outcome on every retry

    await clock.flush(e.stub);
    expect(await executionJson(e.exe.id)).toMatchObject({ callbacks: [{ kind: "success", status: "succeeded", attempts: 2 }] });
    const after = await counters();
    expect(delta(before, after, "succeeded_total")).toBe(1); // the job's execution, not its callback
    expect(delta(before, after, "callbacks_succeeded_total")).toBe(1);
  });

  it("keeps a callback's deliveries out of the job counters: fired, failed attempts, retries and the fire lag are the jobs' (callbacks_attempts_total counts them)", async () => {
    const e = await newExecution({
      target: { url: `${receiverUrl()}${uniquePath("ok")}` },
      callback: { url: `${receiverUrl()}${uniquePath("flaky/1")}` }, // 503 once, then 200
      retry: RETRY,
    });
    const before = await metrics();
    await attempt(e);
    await clock.flush(e.stub);
    const callbackId = await callbackIdOf(e.exe.id, "success");
    await attempt(e, callbackId); // 503: retried after 1 s
    await attempt(e, callbackId); // 200
    await clock.flush(e.stub);
    expect(await executionJson(e.exe.id)).toMatchObject({ callbacks: [{ kind: "success", status: "succeeded", attempts: 2 }] });
    const after = await metrics();
    const counted = (name: string) => delta(before.counters, after.counters, name);
    // the job's one execution: fired once, succeeded once, nothing failed or retried
    expect(counted("fired_total")).toBe(1);
    expect(counted("succeeded_total")).toBe(1);
    expect(counted("failed_attempts_total")).toBe(0);
    expect(counted("retries_total")).toBe(0);
    expect(after.fire_lag_ms.count - before.fire_lag_ms.count).toBe(1);
    // its callback's two attempts, one succeeded
    expect(counted("callbacks_attempts_total")).toBe(2);
    expect(counted("callbacks_succeeded_total")).toBe(1);
    expect(counted("callbacks_dead_total")).toBe(0);
  });

  it("fires no callback for a job without one, and no failureCallback for a success", async () => {
    const failurePath = uniquePath("ok");
    const e = await newExecution({
      target: { url: `${receiverUrl()}${uniquePath("ok")}` },
      failureCallback: { url: `${receiverUrl()}${failurePath}` },
    });
    await attempt(e);
    await clock.flush(e.stub);
    expect(await executionJson(e.exe.id)).toMatchObject({ status: "succeeded", callbacks: [] });
    expect(await bucketSql(e.stub, "SELECT id FROM executions WHERE callback_of = ?", e.exe.id)).toEqual([]);
    expect(await received(failurePath)).toHaveLength(0);
  });
});

describe("callback to a handler Worker, and on a recurring job's occurrence", () => {
  it("calls a handler Worker callback (test/support/handler-worker.mjs) with the outcome as its payload, under the callback's execution id", async () => {
    const e = await newExecution({ target: { url: `${receiverUrl()}${uniquePath("ok")}` }, callback: { worker: "test" }, retry: RETRY });
    expect(e.job.callback).toEqual({ worker: "test" });
    await attempt(e);
    await clock.flush(e.stub);
    const callbackId = await callbackIdOf(e.exe.id, "success");
    await attempt(e, callbackId);
    const calls = (await env.TEST_HANDLER.calls()).filter((c) => c.executionId === callbackId);
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({ tenant: "acme", attempt: 1 });
    expect(calls[0]!.payload).toMatchObject({
      type: "execution.succeeded",
      executionId: e.exe.id,
      jobId: e.job.id,
      status: "succeeded",
      attempts: 1,
      httpStatus: 200,
    });
    await clock.flush(e.stub);
    expect(await executionJson(e.exe.id)).toMatchObject({ callbacks: [{ kind: "success", status: "succeeded", attempts: 1 }] });
  });

  it("tells the callback of each occurrence of a recurring job: the occurrence's own outcome, under an id of its own", async () => {
    const callbackPath = uniquePath("ok");
    const job = await createJob({
      target: { url: `${receiverUrl()}${uniquePath("ok")}` },
      cron: "* * * * *",
      callback: { url: `${receiverUrl()}${callbackPath}` },
      retry: RETRY,
    });
    const row = (await jobRow(job.id))!;
    const stub = bucketStub(row.bucket);
    const ids: string[] = [];
    const callbackIds: string[] = [];
    // two occurrences, a minute apart, each with its callback
    for (let i = 0; i < 2; i++) {
      const at = row.next_run_at! + i * 60_000;
      const id = occurrenceId(job.id, at);
      ids.push(id);
      clock.travelTo(Math.max(at, clock.at));
      expect(await runDurableObjectAlarm(stub)).toBe(true);
      const [message, ...more] = sent.filter((m) => m.executionId === id);
      expect(more).toEqual([]);
      expect((await fire([message!])).explicitAcks).toEqual(["m0"]);
      await clock.flush(stub); // the occurrence's outcome lands in D1; its callback starts
      const callbackId = await callbackIdOf(id, "success");
      callbackIds.push(callbackId);
      expect((await fire([await dispatchNow({ stub, executionId: callbackId }, clock, sent)])).explicitAcks).toEqual(["m0"]);
      await clock.flush(stub);
      expect(await executionJson(id)).toMatchObject({
        status: "succeeded",
        callbacks: [{ kind: "success", status: "succeeded", attempts: 1 }],
      });
    }
    const requests = await received(callbackPath);
    expect(requests.map((r) => r.headers["webhook-id"])).toEqual(callbackIds);
    expect(requests.map((r) => verified(r))).toMatchObject(ids.map((executionId) => ({ executionId, jobId: job.id, status: "succeeded" })));
    expect((await api(`/v1/jobs/${job.id}`, { method: "DELETE" })).status).toBe(200);
  });
});

describe("failureCallback", () => {
  it("tells the failureCallback of a dead execution (its status, dead reason and the target's answer)", async () => {
    const successPath = uniquePath("ok");
    const failurePath = uniquePath("ok");
    const e = await newExecution({
      target: { url: `${receiverUrl()}${uniquePath("fail/404")}` },
      callback: { url: `${receiverUrl()}${successPath}` },
      failureCallback: { url: `${receiverUrl()}${failurePath}` },
      retry: RETRY,
    });
    await attempt(e); // 404: dead at once (permanent)
    await clock.flush(e.stub);
    const callbackId = await callbackIdOf(e.exe.id, "failure");
    await attempt(e, callbackId);
    const [request, ...more] = await received(failurePath);
    expect(more).toEqual([]);
    expect(request!.headers["webhook-id"]).toBe(callbackId);
    expect(verified(request!)).toMatchObject({
      type: "execution.dead",
      executionId: e.exe.id,
      status: "dead",
      attempts: 1,
      httpStatus: 404,
      deadReason: "permanent",
      responseExcerpt: null,
    });
    expect(await received(successPath)).toHaveLength(0);
    await clock.flush(e.stub);
    expect(await executionJson(e.exe.id)).toMatchObject({
      status: "dead",
      callbacks: [{ kind: "failure", status: "succeeded", attempts: 1 }],
    });
  });

  it("retries a failing callback, then lets it die without firing any callback of its own (no loop)", async () => {
    const callbackPath = uniquePath("fail/500");
    const failurePath = uniquePath("ok");
    const e = await newExecution({
      target: { url: `${receiverUrl()}${uniquePath("ok")}` },
      callback: { url: `${receiverUrl()}${callbackPath}` },
      failureCallback: { url: `${receiverUrl()}${failurePath}` },
      retry: RETRY,
    });
    const before = await counters();
    await attempt(e);
    await clock.flush(e.stub);
    const callbackId = await callbackIdOf(e.exe.id, "success");
    await attempt(e, callbackId); // 500: retried
    await attempt(e, callbackId); // 500: its last attempt, dead
    await clock.flush(e.stub);
    expect(await received(callbackPath)).toHaveLength(2);
    expect(await executionJson(e.exe.id)).toMatchObject({
      status: "succeeded",
      callbacks: [{ kind: "success", status: "dead", attempts: 2 }],
    });
    // nothing is left in the bucket: no callback of the callback, and the failureCallback never ran
    expect(await bucketSql(e.stub, "SELECT id FROM executions WHERE job_id = ?", e.job.id)).toEqual([]);
    expect(await received(failurePath)).toHaveLength(0);
    const after = await counters();
    expect(delta(before, after, "callbacks_dead_total")).toBe(1);
    expect(delta(before, after, "dead_total")).toBe(0); // the job's execution succeeded
  });

  it("tells each death of a redriven execution under its own webhook-id: two deliveries, both succeeded", async () => {
    const failurePath = uniquePath("ok");
    const e = await newExecution({
      target: { url: `${receiverUrl()}${uniquePath("fail/404")}` },
      failureCallback: { url: `${receiverUrl()}${failurePath}` },
      retry: RETRY,
    });
    await attempt(e); // 404: dead
    await clock.flush(e.stub);
    const first = await callbackIdOf(e.exe.id, "failure");
    await attempt(e, first);
    await clock.flush(e.stub);
    expect(await executionJson(e.exe.id)).toMatchObject({
      status: "dead",
      callbacks: [{ kind: "failure", status: "succeeded", attempts: 1 }],
    });

    expect((await redrive(e.exe.id)).status).toBe(202);
    await attempt(e); // 404 again: dead, its second attempt
    await clock.flush(e.stub);
    expect(await executionJson(e.exe.id)).toMatchObject({
      status: "dead",
      attempts: 2,
      callbacks: [{ kind: "failure", status: "scheduled" }],
    });
    const second = await callbackIdOf(e.exe.id, "failure");
    expect(second).not.toBe(first);
    await attempt(e, second);
    await clock.flush(e.stub);

    const requests = await received(failurePath);
    expect(requests.map((r) => r.headers["webhook-id"])).toEqual([first, second]);
    expect(requests.map((r) => verified(r).attempts)).toEqual([1, 2]);
    expect(await executionJson(e.exe.id)).toMatchObject({ callbacks: [{ kind: "failure", status: "succeeded", attempts: 1 }] });
    expect(await bucketSql(e.stub, "SELECT id FROM executions WHERE job_id = ?", e.job.id)).toEqual([]);
  });

  it("starts a redriven execution's callback while the first one still retries; the first's late outcome does not overwrite the second's", async () => {
    const failurePath = uniquePath("flaky/1"); // 503 once (the first callback's first attempt), then 200
    const e = await newExecution({
      target: { url: `${receiverUrl()}${uniquePath("fail/404")}` },
      failureCallback: { url: `${receiverUrl()}${failurePath}` },
      retry: { ...RETRY, initialDelayMs: 60_000, maxDelayMs: 60_000 }, // the first callback's retry waits past the redrive
    });
    await attempt(e); // 404: dead
    await clock.flush(e.stub);
    const first = await callbackIdOf(e.exe.id, "failure");
    await attempt(e, first); // 503: retried in 60 s

    expect((await redrive(e.exe.id)).status).toBe(202);
    await attempt(e); // dead again
    await clock.flush(e.stub);
    const second = await callbackIdOf(e.exe.id, "failure");
    expect(second).not.toBe(first);
    // both held: the second was not skipped for the first
    const held = await bucketSql<{ id: string }>(e.stub, "SELECT id FROM executions WHERE callback_of = ? ORDER BY id", e.exe.id);
    expect(held.map((r) => r.id).sort()).toEqual([first, second].sort());

    await attempt(e, second); // 200
    await clock.flush(e.stub);
    expect(await executionJson(e.exe.id)).toMatchObject({ callbacks: [{ kind: "failure", status: "succeeded", attempts: 1 }] });
    await attempt(e, first); // its retry, 60 s later: 200
    await clock.flush(e.stub);

    const requests = await received(failurePath);
    expect(requests.map((r) => r.headers["webhook-id"])).toEqual([first, second, first]);
    expect(requests.map((r) => verified(r).attempts)).toEqual([1, 2, 1]); // each tells of its own death
    // the execution shows the callback of its last outcome, not the first callback's late success (2 attempts)
    expect(await executionJson(e.exe.id)).toMatchObject({ callbacks: [{ kind: "failure", status: "succeeded", attempts: 1 }] });
    expect(await bucketSql(e.stub, "SELECT id FROM executions WHERE job_id = ?", e.job.id)).toEqual([]);
  });
});

describe("a callback added while an attempt runs", () => {
  const OK_200 = { kind: "succeeded", httpStatus: 200, excerpt: "ok" } as const;

  async function claimed(e: Execution): Promise<Extract<ClaimResult, { ok: true }>> {
    const message = await dispatchNow({ stub: e.stub, executionId: e.exe.id }, clock, sent);
    const [lease] = await e.stub.claim([{ executionId: message.executionId, dueAt: message.dueAt }]);
    if (!lease?.ok) throw new Error(`claim refused: ${JSON.stringify(lease)}`);
    return lease;
  }

  it("tells a callback a PATCH added while the attempt ran (decided from the job's spec at the outcome, not at the claim)", async () => {
    const callbackPath = uniquePath("ok");
    const e = await newExecution({ target: { url: `${receiverUrl()}${uniquePath("ok")}` }, retry: RETRY });
    const lease = await claimed(e);
    const patched = await api(`/v1/jobs/${e.job.id}`, { method: "PATCH", body: { callback: { url: `${receiverUrl()}${callbackPath}` } } });
    expect(patched.status).toBe(200);
    expect((await e.view())?.status).toBe("running");
    expect(await e.stub.complete([{ executionId: e.exe.id, token: lease.token, outcome: OK_200 }])).toEqual([
      { ok: true, executionId: e.exe.id, status: "succeeded" },
    ]);
    await clock.flush(e.stub);
    const callbackId = await callbackIdOf(e.exe.id, "success");
    await attempt(e, callbackId);
    const [request, ...more] = await received(callbackPath);
    expect(more).toEqual([]);
    expect(request!.headers["webhook-id"]).toBe(callbackId);
    expect(verified(request!)).toMatchObject({ type: "execution.succeeded", executionId: e.exe.id, attempts: 1 });
    await clock.flush(e.stub);
    expect(await executionJson(e.exe.id)).toMatchObject({ callbacks: [{ kind: "success", status: "succeeded", attempts: 1 }] });
  });

  it("tells it after a bucket restart between the claim and the outcome (a new epoch: the attempt runs again, the spec read at its outcome)", async () => {
    const callbackPath = uniquePath("ok");
    const e = await newExecution({ target: { url: `${receiverUrl()}${uniquePath("ok")}` }, retry: RETRY });
    const lease = await claimed(e);
    const patched = await api(`/v1/jobs/${e.job.id}`, { method: "PATCH", body: { callback: { url: `${receiverUrl()}${callbackPath}` } } });
    expect(patched.status).toBe(200);
    await evictDurableObject(e.stub); // the instance goes, its storage (the patched spec) stays
    expect(await e.stub.complete([{ executionId: e.exe.id, token: lease.token, outcome: OK_200 }])).toEqual([
      { ok: false, executionId: e.exe.id, code: "stale_lease" },
    ]);
    await attempt(e); // scheduled again after the restart: delivered, succeeded
    await clock.flush(e.stub);
    const callbackId = await callbackIdOf(e.exe.id, "success");
    await attempt(e, callbackId);
    expect((await received(callbackPath)).map((r) => r.headers["webhook-id"])).toEqual([callbackId]);
    await clock.flush(e.stub);
    expect(await executionJson(e.exe.id)).toMatchObject({ callbacks: [{ kind: "success", status: "succeeded", attempts: 1 }] });
  });
});

describe("validation", () => {
  it.each([
    [{ callback: { url: "ftp://example.com/x" } }, "callback.url"],
    [{ callback: { url: "https://example.com/x", worker: "w" } }, "callback.worker"],
    [{ failureCallback: { worker: "no-such-worker" } }, "failureCallback.worker"],
    [{ failureCallback: { pull: "queue" } }, "failureCallback.pull"],
    [{ callback: { url: "https://example.com/x", headers: { "webhook-id": "x" } } }, "callback.headers.webhook-id"],
    [{ callback: {} }, "callback.url"],
  ])("refuses %j with a 400 naming %s", async (fields, field) => {
    const res = await api("/v1/jobs", { method: "POST", body: { target: { url: "https://example.com/t" }, ...fields } });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { field: string } }).error.field).toBe(field);
  });

  it("keeps a job's callbacks across a PATCH, and a PATCH with null removes one", async () => {
    const e = await newExecution({
      target: { url: "https://example.com/t" },
      runAt: new Date(clock.at + 3_600_000).toISOString(),
      callback: { url: "https://example.com/cb" },
      failureCallback: { url: "https://example.com/fail" },
    });
    const patched = await api(`/v1/jobs/${e.job.id}`, { method: "PATCH", body: { name: "renamed", failureCallback: null } });
    expect(patched.status).toBe(200);
    const job = (await patched.json()) as Record<string, unknown>;
    expect(job.callback).toEqual({ url: "https://example.com/cb", headers: {} });
    expect(job.failureCallback).toBeUndefined();
    await api(`/v1/jobs/${e.job.id}`, { method: "DELETE" });
  });
});
