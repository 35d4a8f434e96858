/**
 * The core path inside workerd: create -> D1 -> bucket -> alarm -> fire message -> signed
 * webhook -> completion -> mirror to D1. Proves invariant 1 (durable before the 201), invariant 5
 * (idempotency key = execution id), cancel-before-due, a retryable 500, and the alarm re-arm rule.
 *
 * Determinism: jobs are created due a minute or more ahead so the real alarm cannot fire on its
 * own mid-test; the test backdates the bucket row and runs the alarm itself. captureFires() keeps
 * the real queue consumer from taking fire messages in the background; the test feeds the
 * captured messages through worker.queue. flushMirror() passes the mirror delay by running the
 * alarm at its armed time with the clock shifted, not by sleeping.
 * Storage is shared by the tests of this file: the alarm test runs first, on fresh buckets.
 */
import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import {
  alarmOf,
  api,
  bucketAttempts,
  bucketRow,
  bucketSql,
  bucketStub,
  captureFires,
  counters,
  createJob,
  executionOf,
  fire,
  fireMessage,
  flushMirror,
  received,
  receiverUrl,
  uniquePath,
} from "./helpers";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const QUANTUM_MS = 50; // ALARM_QUANTUM_MS
const TERMINAL_RETENTION_MS = 3_600_000;
const quantized = (at: number) => Math.ceil(at / QUANTUM_MS) * QUANTUM_MS;

/** Backdates an execution in its bucket so the next alarm finds it due (instead of sleeping). */
async function makeDue(stub: ReturnType<typeof bucketStub>, executionId: string): Promise<number> {
  const now = Date.now();
  await bucketSql(stub, "UPDATE executions SET due_at = ? WHERE id = ?", now, executionId);
  return now;
}

describe("the bucket alarm", () => {
  it("is re-armed after each change to the earliest wake-up, quantized up to 50 ms", async () => {
    captureFires();
    const x = await createJob({ target: { url: `${receiverUrl()}${uniquePath()}` }, delay: "150s" });
    const xRow = (await executionOf(x.id))!;
    const stub = bucketStub(xRow.bucket);
    // precondition: this test runs first in its file, so the bucket holds nothing else
    expect(await bucketSql(stub, "SELECT id FROM executions")).toEqual([{ id: xRow.id }]);
    expect(await alarmOf(stub)).toBe(quantized(xRow.due_at));

    // an earlier execution in the same bucket moves the alarm forward (jobs hash to one of 4 buckets)
    const batch = await api("/v1/jobs/batch", {
      method: "POST",
      body: { jobs: Array.from({ length: 60 }, () => ({ target: { url: `${receiverUrl()}${uniquePath()}` }, delay: "100s" })) },
    });
    expect(batch.status).toBe(200);
    const ids = ((await batch.json()) as { results: { job: { id: string } }[] }).results.map((r) => r.job.id);
    const rows = await Promise.all(ids.map(async (id) => (await executionOf(id))!));
    const sameBucket = rows.filter((r) => r.bucket === xRow.bucket);
    expect(sameBucket.length).toBeGreaterThan(0);
    const earliest = Math.min(...sameBucket.map((r) => r.due_at));
    expect(earliest).toBeLessThan(xRow.due_at);
    expect(await alarmOf(stub)).toBe(quantized(earliest));

    // canceling them leaves X the earliest due once the cancel is mirrored
    for (const id of ids) expect((await api(`/v1/jobs/${id}`, { method: "DELETE" })).status).toBe(200);
    expect((await bucketRow(stub, sameBucket[0]!.id))!.status).toBe("canceled");
    await flushMirror(stub);
    expect(await bucketSql(stub, "SELECT id FROM executions WHERE dirty = 1")).toEqual([]);
    expect(await alarmOf(stub)).toBe(quantized(xRow.due_at));

    // with nothing left to fire, the alarm waits for the oldest terminal row's purge
    expect((await api(`/v1/jobs/${x.id}`, { method: "DELETE" })).status).toBe(200);
    await flushMirror(stub);
    const [{ oldest }] = (await bucketSql<{ oldest: number }>(
      stub,
      "SELECT MIN(finished_at) AS oldest FROM executions WHERE status = 'canceled'",
    )) as [{ oldest: number }];
    expect(await alarmOf(stub)).toBe(quantized(oldest + TERMINAL_RETENTION_MS));

    // leave no bucket with work for a background alarm run during the next tests
    for (let k = 0; k < Number(env.BUCKETS); k++) await flushMirror(bucketStub(k));
  });
});

describe("firing", () => {
  it("fires a job end to end: durable in D1 before the 201, alarm, fire message, signed webhook, mirror (invariants 1, 5)", async () => {
    const fires = captureFires();
    const path = uniquePath();
    const payload = { hello: "world", n: 1 };
    const before = await counters();
    const job = await createJob({ name: "end-to-end", target: { url: `${receiverUrl()}${path}`, body: payload }, delay: "1m" });

    // invariant 1: the job and its execution are in D1 by the time the 201 arrived
    const jobRow = await env.DB.prepare("SELECT status, tenant FROM jobs WHERE id = ?").bind(job.id).first();
    expect(jobRow).toEqual({ status: "active", tenant: "acme" });
    const row = (await executionOf(job.id))!;
    expect(row).toMatchObject({ job_id: job.id, tenant: "acme", status: "scheduled", attempts: 0 }); // pending -> scheduled by the hand-off

    const stub = bucketStub(row.bucket);
    expect(await bucketRow(stub, row.id)).toMatchObject({ status: "scheduled", due_at: row.due_at, attempt: 0, job_id: job.id });

    const dueAt = await makeDue(stub, row.id);
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    const dispatched = (await bucketRow(stub, row.id))!;
    expect(dispatched.status).toBe("dispatched");
    expect(dispatched.dispatch_deadline_at).toBeGreaterThan(dueAt);
    // re-armed no later than the dispatch deadline: the message is sent again if nobody claims it
    // (sooner when the mirror is still owed: earlier tests shifted the clock past the last flush)
    const rearmed = await alarmOf(stub);
    expect(rearmed).not.toBeNull();
    expect(rearmed!).toBeLessThanOrEqual(quantized(dispatched.dispatch_deadline_at!));
    const messages = fires.messages.filter((m) => m.executionId === row.id);
    expect(messages).toEqual([{ v: 1, executionId: row.id, bucket: row.bucket, tenant: "acme", dueAt }]);

    const result = await fire(messages);
    expect(result.explicitAcks).toEqual(["m0"]);
    expect(result.retryMessages).toEqual([]);
    expect(await bucketRow(stub, row.id)).toMatchObject({ status: "succeeded", attempt: 1, last_http_status: 200, lease_token: null });

    const got = await received(path);
    expect(got).toHaveLength(1);
    const request = got[0]!;
    expect(request.method).toBe("POST");
    expect(request.body).toBe(JSON.stringify(payload));
    expect(request.headers["content-type"]).toBe("application/json");
    expect(new Webhook(SECRET).verify(request.body, request.headers)).toEqual(payload);
    // invariant 5: one stable key per execution, given to the handler twice over
    expect(request.headers["webhook-id"]).toBe(row.id);
    expect(request.headers["idempotency-key"]).toBe(row.id);
    expect(request.headers["x-scheduler-attempt"]).toBe("1");
    expect(request.headers["x-scheduler-job-id"]).toBe(job.id);

    await flushMirror(stub);
    expect(await executionOf(job.id)).toMatchObject({ status: "succeeded", attempts: 1, last_http_status: 200 });
    const executions = (await (await api(`/v1/jobs/${job.id}/executions`)).json()) as {
      executions: { id: string; status: string; attempts: { attempt: number; outcome: string; httpStatus: number; lagMs: number }[] }[];
    };
    expect(executions.executions).toHaveLength(1);
    expect(executions.executions[0]).toMatchObject({ id: row.id, status: "succeeded" });
    expect(executions.executions[0]!.attempts).toEqual([
      expect.objectContaining({ attempt: 1, outcome: "succeeded", httpStatus: 200, lagMs: expect.any(Number) }),
    ]);
    expect(executions.executions[0]!.attempts[0]!.lagMs).toBeGreaterThanOrEqual(0);
    const shown = (await (await api(`/v1/jobs/${job.id}`)).json()) as { status: string; latestExecution: { status: string } };
    expect(shown.status).toBe("completed");
    expect(shown.latestExecution.status).toBe("succeeded");

    const after = await counters();
    expect(after.fired_total! - before.fired_total!).toBeGreaterThanOrEqual(1);
    expect(after.succeeded_total! - before.succeeded_total!).toBeGreaterThanOrEqual(1);
  });

  it("keeps a job due beyond the lookahead durable in D1 as pending, not in its bucket (invariant 1)", async () => {
    const runAt = new Date(Date.now() + 3_600_000).toISOString();
    const job = await createJob({ target: { url: `${receiverUrl()}${uniquePath()}` }, runAt });
    const row = (await executionOf(job.id))!;
    expect(row).toMatchObject({ status: "pending", due_at: Date.parse(runAt), time_bucket: Math.floor(Date.parse(runAt) / 60_000) });
    expect(await bucketRow(bucketStub(row.bucket), row.id)).toBeUndefined();
  });

  it("fires nothing for a job canceled before its due time", async () => {
    const fires = captureFires();
    const path = uniquePath();
    const job = await createJob({ target: { url: `${receiverUrl()}${path}` }, delay: "1s" });
    const row = (await executionOf(job.id))!;
    const stub = bucketStub(row.bucket);
    expect((await bucketRow(stub, row.id))!.status).toBe("scheduled");

    const res = await api(`/v1/jobs/${job.id}`, { method: "DELETE" });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { status: string }).status).toBe("canceled");
    expect((await bucketRow(stub, row.id))!.status).toBe("canceled");

    // past its due time the alarm still sends nothing for it
    await makeDue(stub, row.id);
    await runDurableObjectAlarm(stub); // may already have run in the background (armed for the mirror)
    expect((await bucketRow(stub, row.id))!.status).toBe("canceled");
    expect(fires.messages.filter((m) => m.executionId === row.id)).toEqual([]);

    // a fire message already in flight is acked and dropped (invariant 7)
    const result = await fire([fireMessage(row)]);
    expect(result.explicitAcks).toEqual(["m0"]);
    expect((await bucketRow(stub, row.id))!.status).toBe("canceled");
    expect(await received(path)).toEqual([]);

    await flushMirror(stub);
    expect((await executionOf(job.id))!.status).toBe("canceled");
  });

  it("records a target's 500 as a failed retryable attempt and backs off (invariant 6)", async () => {
    const fires = captureFires();
    const path = uniquePath("fail/500");
    const before = await counters();
    // a long, jitter-free backoff: the retry cannot fire on its own before the test ends
    const retry = { initialDelayMs: 60_000, maxDelayMs: 60_000, jitter: 0 };
    const job = await createJob({ target: { url: `${receiverUrl()}${path}` }, delay: "1m", retry });
    const row = (await executionOf(job.id))!;
    const stub = bucketStub(row.bucket);
    const dueAt = await makeDue(stub, row.id);
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    const messages = fires.messages.filter((m) => m.executionId === row.id);
    expect(messages).toHaveLength(1);

    const sentAt = Date.now();
    const result = await fire(messages);
    const doneAt = Date.now();
    expect(result.explicitAcks).toEqual(["m0"]);
    expect(result.retryMessages).toEqual([]);
    expect(await received(path)).toHaveLength(1);

    const retried = (await bucketRow(stub, row.id))!;
    expect(retried).toMatchObject({ status: "scheduled", attempt: 1, last_http_status: 500, lease_token: null });
    expect(retried.due_at).toBeGreaterThan(dueAt);
    expect(retried.due_at).toBeGreaterThanOrEqual(sentAt + retry.initialDelayMs);
    expect(retried.due_at).toBeLessThanOrEqual(doneAt + retry.initialDelayMs);
    expect(await bucketAttempts(stub, row.id)).toEqual([
      expect.objectContaining({ attempt: 1, outcome: "retryable", http_status: 500, error: expect.stringContaining("HTTP 500") }),
    ]);

    await flushMirror(stub);
    expect(await executionOf(job.id)).toMatchObject({ status: "scheduled", attempts: 1, last_http_status: 500 });
    const attempts = await env.DB.prepare("SELECT attempt, outcome, http_status FROM attempts WHERE execution_id = ?").bind(row.id).all();
    expect(attempts.results).toEqual([{ attempt: 1, outcome: "retryable", http_status: 500 }]);
    // mirrored, nothing else to do before the retry: the alarm is the retry's due time
    expect(await alarmOf(stub)).toBe(quantized(retried.due_at));

    const after = await counters();
    expect(after.failed_attempts_total! - before.failed_attempts_total!).toBe(1);
    expect(after.retries_total! - before.retries_total!).toBe(1);
  });

  // last in the file: while the bug it guards against exists, it leaves a row running for a lease
  it("acks every message and completes the others when one delivery cannot even be built (consumers never throw for one message)", async () => {
    const fires = captureFires();
    const goodPath = uniquePath();
    const good = await createJob({ target: { url: `${receiverUrl()}${goodPath}` }, delay: "1m" });
    const bad = await createJob({ target: { url: `${receiverUrl()}${uniquePath()}` }, delay: "1m" });
    const rows = [(await executionOf(good.id))!, (await executionOf(bad.id))!];
    // a header value fetch() refuses (stored before the API checked it, or by an older version)
    const badStub = bucketStub(rows[1]!.bucket);
    await bucketSql(badStub, `UPDATE jobs SET spec = json_set(spec, '$.target.headers', json('{"x-note":"a\\r\\nb"}')) WHERE id = ?`, bad.id);
    for (const row of rows) {
      const stub = bucketStub(row.bucket);
      await makeDue(stub, row.id);
      await runDurableObjectAlarm(stub);
    }
    const messages = rows.map((row) => fires.messages.find((m) => m.executionId === row.id)!);

    const result = await fire(messages);
    expect(result.explicitAcks.sort()).toEqual(["m0", "m1"]);
    expect(result.retryMessages).toEqual([]);
    expect((await bucketRow(bucketStub(rows[0]!.bucket), rows[0]!.id))!.status).toBe("succeeded");
    expect(await received(goodPath)).toHaveLength(1);
    // the broken one is closed as a failed attempt, not left running until its lease expires
    const broken = (await bucketRow(badStub, rows[1]!.id))!;
    expect(broken.status).not.toBe("running");
    expect(broken.lease_token).toBeNull();
  });
});
