/**
 * The core path inside workerd: create -> D1 -> bucket -> alarm -> fire message -> signed
 * webhook -> completion -> the outcome on the job's D1 row after the bucket's flush. Proves
 * invariant 1 (durable in D1 before the 2xx; a job due beyond the lookahead lives in D1 only
 * until the sync pass brings it), invariant 5 (idempotency key = execution id), cancel before
 * the due time, a retryable 500 that backs off (invariant 6), a delivery that cannot even be
 * built (a permanent failure that never fails its batch), and the alarm re-arm rule.
 *
 * Time: one file-wide virtual clock (helpers.fileClock) 10 minutes ahead of the real one, so no
 * bucket alarm fires on its own while the file runs; tests travel it forward and run the alarms
 * themselves. Every fire-queue send is captured (captureFiresForFile) and fed to the consumer
 * with fire(). Storage is shared by the tests of this file: ids and receiver paths are unique.
 */
import { runDurableObjectAlarm } from "cloudflare:test";
import { Webhook } from "standardwebhooks";
import { describe, expect, it, onTestFinished, vi } from "vitest";
import type { FireMessage } from "../../src/bucket/protocol";
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
  everyD1,
  executionOf,
  FLUSH_DELAY_MS,
  fileClock,
  fire,
  fireMessage,
  jobRow,
  live,
  newExecution,
  received,
  receiverUrl,
  runScan,
  takeSent,
  uniquePath,
} from "./helpers";

const SECRET = CONFIG.WEBHOOK_SECRET; // vitest.config.ts
const BUCKETS = CONFIG.BUCKETS;
const QUANTUM_MS = CONFIG.ALARM_QUANTUM_MS;
const LOOKAHEAD_MS = CONFIG.LOOKAHEAD_MS;
const DISPATCH_TIMEOUT_MS = CONFIG.DISPATCH_TIMEOUT_MS;
const quantized = (at: number) => Math.ceil(at / QUANTUM_MS) * QUANTUM_MS;

const clock = fileClock(10 * 60_000);
const sent = captureFiresForFile();

const messagesOf = (executionId: string): FireMessage[] => takeSent(sent, executionId);

/** Travels to the execution's due time and runs its bucket's alarm: returns what it sent for it. */
async function dispatchAtDue(e: Execution): Promise<FireMessage[]> {
  clock.travelTo(Math.max(clock.at, e.exe.due_at));
  expect(await runDurableObjectAlarm(e.stub)).toBe(true);
  return messagesOf(e.exe.id);
}

/** Cancels the job when the test ends (a 409 once it completed is fine). */
function cancelAtEnd(jobId: string): void {
  onTestFinished(async () => {
    await api(`/v1/jobs/${jobId}`, { method: "DELETE" });
  });
}

describe("the bucket alarm", () => {
  it("is re-armed by every change no later than the earliest due execution (quantized), and fires nothing early or canceled", async () => {
    const x = await newExecution({ target: { url: `${receiverUrl()}${uniquePath()}` }, delay: "150s" });
    cancelAtEnd(x.job.id);
    const first = await alarmOf(x.stub);
    expect(first).not.toBeNull();
    expect(first!).toBeLessThanOrEqual(quantized(x.exe.due_at));

    // earlier jobs in the same bucket move the alarm forward (jobs hash to one of 4 buckets)
    const batch = await api("/v1/jobs/batch", {
      method: "POST",
      body: { jobs: Array.from({ length: 60 }, () => ({ target: { url: `${receiverUrl()}${uniquePath()}` }, delay: "100s" })) },
    });
    expect(batch.status).toBe(200);
    const ids = ((await batch.json()) as { results: { job: { id: string } }[] }).results.map((r) => r.job.id);
    const rows = await Promise.all(ids.map(async (id) => (await executionOf(id))!));
    const sameBucket = rows.filter((r) => r.bucket === x.exe.bucket);
    expect(sameBucket.length).toBeGreaterThan(0);
    const earliest = Math.min(...sameBucket.map((r) => r.due_at));
    expect(earliest).toBeLessThan(x.exe.due_at);
    expect((await alarmOf(x.stub))!).toBeLessThanOrEqual(quantized(earliest));

    // canceled (applied by the bucket: 200), they never fire; X fires at its due time, not before
    for (const id of ids) expect((await api(`/v1/jobs/${id}`, { method: "DELETE" })).status).toBe(200);
    const canceled = new Set(rows.map((r) => r.id));
    let firedAt: number | null = null;
    for (let step = 0; step < 100 && firedAt === null; step++) {
      const at = await alarmOf(x.stub);
      expect(at, "the bucket holds X: its alarm is armed").not.toBeNull();
      expect(at!).toBeLessThanOrEqual(quantized(x.exe.due_at));
      clock.travelTo(Math.max(clock.at, at!));
      expect(await runDurableObjectAlarm(x.stub)).toBe(true);
      if (messagesOf(x.exe.id).length > 0) firedAt = clock.at;
    }
    expect(firedAt).not.toBeNull();
    expect(firedAt!).toBeGreaterThanOrEqual(x.exe.due_at);
    expect(firedAt!).toBeLessThanOrEqual(quantized(x.exe.due_at));
    expect(sent.filter((m) => canceled.has(m.executionId))).toEqual([]);
    for (let k = 0; k < BUCKETS; k++) await clock.flush(bucketStub(k));
    for (const r of sameBucket) expect(await jobRow(r.job_id)).toMatchObject({ status: "canceled", run_status: "canceled" });
  });
});

describe("firing", () => {
  it("fires a job end to end: durable in D1 before the 201, alarm, fire message, signed webhook, outcome on the D1 row after the flush (invariants 1, 5)", async () => {
    const path = uniquePath();
    const payload = { hello: "world", n: 1 };
    const before = await counters();
    const e = await newExecution({ name: "end-to-end", target: { url: `${receiverUrl()}${path}`, body: payload }, delay: "1m" });
    const { job, exe, stub } = e;

    // invariant 1: the job is in D1 by the time the 201 arrived, and its bucket acknowledged it
    expect(await jobRow(job.id)).toMatchObject({
      tenant: "acme",
      status: "active",
      version: 1,
      synced: 1,
      next_run_at: exe.due_at,
      run_status: null,
      attempts: 0,
    });
    expect(exe.id).toBe(`exe_${job.id.slice(4)}`);
    expect(await live(stub, exe.id)).toMatchObject({ status: "scheduled", dueAt: exe.due_at, attempts: 0, jobId: job.id });
    expect(await bucketRow(stub, exe.id)).toMatchObject({ due_at: exe.due_at, job_id: job.id, attempt: 0 });

    // before its due time the alarm sends nothing
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect(messagesOf(exe.id)).toEqual([]);

    const messages = await dispatchAtDue(e);
    expect(messages).toEqual([{ v: 1, executionId: exe.id, bucket: exe.bucket, tenant: "acme", dueAt: exe.due_at }]);
    expect(await live(stub, exe.id)).toMatchObject({ status: "dispatched" });
    // re-armed no later than the dispatch timeout: a lost message is noticed
    const rearmed = await alarmOf(stub);
    expect(rearmed).not.toBeNull();
    expect(rearmed!).toBeLessThanOrEqual(quantized(clock.at + DISPATCH_TIMEOUT_MS));

    const result = await fire(messages);
    expect(result.explicitAcks).toEqual(["m0"]);
    expect(result.retryMessages).toEqual([]);
    expect(await live(stub, exe.id)).toMatchObject({ status: "succeeded", attempts: 1, lastHttpStatus: 200 });

    const got = await received(path);
    expect(got).toHaveLength(1);
    const request = got[0]!;
    expect(request.method).toBe("POST");
    expect(request.body).toBe(JSON.stringify(payload));
    expect(request.headers["content-type"]).toBe("application/json");
    expect(new Webhook(SECRET).verify(request.body, request.headers)).toEqual(payload);
    // invariant 5: one stable key per execution, given to the handler twice over
    expect(request.headers["webhook-id"]).toBe(exe.id);
    expect(request.headers["idempotency-key"]).toBe(exe.id);
    expect(request.headers["x-scheduler-attempt"]).toBe("1");
    expect(request.headers["x-scheduler-job-id"]).toBe(job.id);

    // D1 gets the outcome once, with the flush; then the bucket lets the row go
    expect(await jobRow(job.id)).toMatchObject({ status: "active", run_status: null, attempts: 0 });
    await clock.flush(stub);
    const row = (await jobRow(job.id))!;
    expect(row).toMatchObject({ status: "completed", run_status: "succeeded", attempts: 1, last_http_status: 200, last_error: null });
    expect(row.finished_at).toBe(clock.at - FLUSH_DELAY_MS);
    expect(JSON.parse(row.attempt_log!)).toEqual([
      expect.objectContaining({ attempt: 1, dueAt: exe.due_at, outcome: "succeeded", httpStatus: 200, error: null }),
    ]);
    expect(await bucketRow(stub, exe.id)).toBeUndefined();
    expect(await live(stub, exe.id)).toBeUndefined();

    const executions = (await (await api(`/v1/jobs/${job.id}/executions`)).json()) as {
      executions: { id: string; status: string; attempts: { attempt: number; outcome: string; httpStatus: number; lagMs: number }[] }[];
    };
    expect(executions.executions).toHaveLength(1);
    expect(executions.executions[0]).toMatchObject({ id: exe.id, status: "succeeded" });
    expect(executions.executions[0]!.attempts).toEqual([
      // the receiver answers "ok": kept as the attempt's response excerpt
      expect.objectContaining({ attempt: 1, outcome: "succeeded", httpStatus: 200, lagMs: expect.any(Number), responseExcerpt: "ok" }),
    ]);
    expect(executions.executions[0]!.attempts[0]!.lagMs).toBeGreaterThanOrEqual(0);
    const shown = (await (await api(`/v1/jobs/${job.id}`)).json()) as { status: string; latestExecution: { status: string } };
    expect(shown.status).toBe("completed");
    expect(shown.latestExecution.status).toBe("succeeded");

    const after = await counters();
    expect(after.fired_total! - (before.fired_total ?? 0)).toBe(1);
    expect(after.succeeded_total! - (before.succeeded_total ?? 0)).toBe(1);
  });

  it("never answers 2xx for a job D1 did not take (invariant 1)", async () => {
    const path = uniquePath();
    const failing = everyD1().map((d1) => vi.spyOn(d1, "batch").mockRejectedValueOnce(new Error("injected: D1 unavailable")));
    onTestFinished(() => {
      for (const spy of failing) spy.mockRestore();
    });
    const res = await api("/v1/jobs", { method: "POST", body: { target: { url: `${receiverUrl()}${path}` }, delay: "1m" } });
    expect(failing.some((spy) => spy.mock.calls.length > 0)).toBe(true);
    // the shard the request's jobs went to did not answer: a 503 naming it
    expect(res.status).toBe(503);
    expect(((await res.json()) as { error: { code: string; message: string } }).error).toMatchObject({
      code: "shard_unavailable",
      message: expect.stringMatching(/^D1 shard \d+ \(binding DB(_\d+)?\) did not answer/),
    });
    for (const spy of failing) spy.mockRestore();
    // nothing of it anywhere: not in D1, not in any bucket, never delivered
    for (const d1 of everyD1()) {
      const inD1 = await d1.prepare("SELECT count(*) AS n FROM jobs WHERE spec LIKE ?").bind(`%${path}%`).first<{ n: number }>();
      expect(inD1?.n).toBe(0);
    }
    for (let k = 0; k < BUCKETS; k++) {
      expect(await bucketSql(bucketStub(k), "SELECT id FROM executions WHERE spec LIKE ?", `%${path}%`)).toEqual([]);
    }
    clock.advance(60_000);
    for (let k = 0; k < BUCKETS; k++) await runDurableObjectAlarm(bucketStub(k));
    expect(await received(path)).toEqual([]);
  });

  it("keeps a job due beyond the lookahead in D1 only, not in its bucket; the sync pass brings it when near and it fires (invariant 1)", async () => {
    const path = uniquePath();
    const runAt = clock.at + LOOKAHEAD_MS + 10 * 60_000;
    const before = await counters();
    const e = await newExecution({ target: { url: `${receiverUrl()}${path}` }, runAt: new Date(runAt).toISOString() });
    cancelAtEnd(e.job.id);
    expect(await jobRow(e.job.id)).toMatchObject({ status: "active", next_run_at: runAt, synced: 1, run_status: null });
    expect(await live(e.stub, e.exe.id)).toBeUndefined();
    expect(await bucketRow(e.stub, e.exe.id)).toBeUndefined();
    const shown = (await (await api(`/v1/executions/${e.exe.id}`)).json()) as { status: string };
    expect(shown.status).toBe("pending");

    // a scan while it is still far leaves it in D1
    await runScan();
    expect(await bucketRow(e.stub, e.exe.id)).toBeUndefined();

    // within the lookahead, the scan's sync pass hands it to its bucket
    clock.travelTo(runAt - LOOKAHEAD_MS + 1_000);
    await runScan();
    expect(await live(e.stub, e.exe.id)).toMatchObject({ status: "scheduled", dueAt: runAt });
    expect((await counters()).scanner_recovered_total! - (before.scanner_recovered_total ?? 0)).toBe(1);

    const messages = await dispatchAtDue(e);
    expect(messages).toEqual([{ ...e.message, dueAt: runAt }]);
    expect((await fire(messages)).explicitAcks).toEqual(["m0"]);
    expect(await received(path)).toHaveLength(1);
    await clock.flush(e.stub);
    expect(await jobRow(e.job.id)).toMatchObject({ status: "completed", run_status: "succeeded", attempts: 1 });
  });

  it("fires nothing for a job canceled before its due time, and acks and drops a fire message already in flight", async () => {
    const path = uniquePath();
    const e = await newExecution({ target: { url: `${receiverUrl()}${path}` }, delay: "1m" });
    expect(await live(e.stub, e.exe.id)).toMatchObject({ status: "scheduled" });

    const res = await api(`/v1/jobs/${e.job.id}`, { method: "DELETE" });
    expect(res.status).toBe(200); // the bucket applied it
    expect(((await res.json()) as { status: string }).status).toBe("canceled");
    expect(await live(e.stub, e.exe.id)).toMatchObject({ status: "canceled" });

    // past its due time the alarm sends nothing for it
    expect(await dispatchAtDue(e)).toEqual([]);

    // a fire message already in flight is acked and dropped (invariant 7)
    const result = await fire([fireMessage(e.exe)]);
    expect(result.explicitAcks).toEqual(["m0"]);
    expect(result.retryMessages).toEqual([]);
    expect(await received(path)).toEqual([]);

    await clock.flush(e.stub);
    expect(await jobRow(e.job.id)).toMatchObject({ status: "canceled", run_status: "canceled", attempts: 0 });
    expect(await bucketRow(e.stub, e.exe.id)).toBeUndefined();
    expect((await fire([fireMessage(e.exe)])).explicitAcks).toEqual(["m0"]);
    expect(await received(path)).toEqual([]);
  });

  it("records a target's 500 as a failed retryable attempt and backs off (invariant 6)", async () => {
    const path = uniquePath("fail/500");
    const before = await counters();
    // a long, jitter-free backoff
    const retry = { initialDelayMs: 60_000, maxDelayMs: 60_000, jitter: 0 };
    const e = await newExecution({ target: { url: `${receiverUrl()}${path}` }, delay: "1m", retry });
    cancelAtEnd(e.job.id);
    const messages = await dispatchAtDue(e);
    expect(messages).toHaveLength(1);

    const failedAt = clock.at;
    const result = await fire(messages);
    expect(result.explicitAcks).toEqual(["m0"]);
    expect(result.retryMessages).toEqual([]);
    expect(await received(path)).toHaveLength(1);

    const retryAt = failedAt + retry.initialDelayMs;
    expect(await live(e.stub, e.exe.id)).toMatchObject({
      status: "scheduled",
      dueAt: retryAt,
      occurrenceAt: e.exe.due_at,
      attempts: 1,
      lastHttpStatus: 500,
      attemptLog: [
        expect.objectContaining({
          attempt: 1,
          dueAt: e.exe.due_at,
          outcome: "retryable",
          httpStatus: 500,
          error: expect.stringContaining("HTTP 500"),
        }),
      ],
    });
    expect(await bucketRow(e.stub, e.exe.id)).toMatchObject({ due_at: retryAt, attempt: 1 });
    const shown = (await (await api(`/v1/jobs/${e.job.id}/executions`)).json()) as {
      executions: { status: string; attempts: { outcome: string; httpStatus: number }[] }[];
    };
    expect(shown.executions).toEqual([
      expect.objectContaining({ status: "scheduled", attempts: [expect.objectContaining({ outcome: "retryable", httpStatus: 500 })] }),
    ]);

    // an intermediate state is never written to D1: the job row waits for the outcome
    await clock.flush(e.stub);
    expect(await jobRow(e.job.id)).toMatchObject({ status: "active", run_status: null, attempts: 0, last_http_status: null });
    // the old message is now a duplicate; nothing is sent before the retry's due time
    expect((await fire(messages)).explicitAcks).toEqual(["m0"]);
    expect(await received(path)).toHaveLength(1);
    clock.travelTo(retryAt - 1_000);
    await runDurableObjectAlarm(e.stub);
    expect(messagesOf(e.exe.id)).toEqual([]);
    const armed = await alarmOf(e.stub);
    expect(armed).not.toBeNull();
    expect(armed!).toBeLessThanOrEqual(quantized(retryAt));

    // at the retry's due time it is sent again, as attempt 2
    clock.travelTo(retryAt);
    expect(await runDurableObjectAlarm(e.stub)).toBe(true);
    const again = messagesOf(e.exe.id);
    expect(again).toEqual([{ ...e.message, dueAt: retryAt }]);
    expect((await fire(again)).explicitAcks).toEqual(["m0"]);
    const attempts = await received(path);
    expect(attempts.map((r) => r.headers["x-scheduler-attempt"])).toEqual(["1", "2"]);
    expect(attempts.map((r) => r.headers["webhook-id"])).toEqual([e.exe.id, e.exe.id]);

    const after = await counters();
    expect(after.failed_attempts_total! - (before.failed_attempts_total ?? 0)).toBe(2);
    expect(after.retries_total! - (before.retries_total ?? 0)).toBe(2);
  });

  it("acks every message and completes the others when one delivery cannot even be built: a permanent failure (consumers never throw for one message)", async () => {
    const goodPath = uniquePath();
    const badPath = uniquePath();
    const before = await counters();
    const good = await newExecution({ target: { url: `${receiverUrl()}${goodPath}` }, delay: "1m" });
    const bad = await newExecution({ target: { url: `${receiverUrl()}${badPath}` }, delay: "1m" });
    // a header value fetch() refuses (stored before the API checked it, or by an older version)
    await bucketSql(
      bad.stub,
      `UPDATE executions SET spec = json_set(spec, '$.target.headers', json('{"x-note":"a\\r\\nb"}')) WHERE id = ?`,
      bad.exe.id,
    );
    const messages = [...(await dispatchAtDue(good)), ...(await dispatchAtDue(bad))];
    expect(messages.map((m) => m.executionId)).toEqual([good.exe.id, bad.exe.id]);

    const result = await fire(messages);
    expect(result.explicitAcks.sort()).toEqual(["m0", "m1"]);
    expect(result.retryMessages).toEqual([]);
    expect(await live(good.stub, good.exe.id)).toMatchObject({ status: "succeeded", attempts: 1 });
    expect(await received(goodPath)).toHaveLength(1);
    // the broken one failed for good at once: not retried, not left running until its lease expires
    expect(await live(bad.stub, bad.exe.id)).toMatchObject({
      status: "dead",
      attempts: 1,
      lastHttpStatus: null,
      lastError: expect.stringContaining("could not be built"),
    });
    expect(await received(badPath)).toEqual([]);

    await clock.flush(good.stub);
    await clock.flush(bad.stub);
    expect(await jobRow(good.job.id)).toMatchObject({ status: "completed", run_status: "succeeded" });
    expect(await jobRow(bad.job.id)).toMatchObject({ status: "completed", run_status: "dead", dead_reason: "permanent", attempts: 1 });
    const dlq = (await (await api("/v1/dlq")).json()) as { executions: { id: string; deadReason: string }[] };
    expect(dlq.executions).toContainEqual(expect.objectContaining({ id: bad.exe.id, deadReason: "permanent" }));
    const after = await counters();
    expect(after.failed_attempts_total! - (before.failed_attempts_total ?? 0)).toBe(1);
    expect(after.retries_total ?? 0).toBe(before.retries_total ?? 0);
  });
});
