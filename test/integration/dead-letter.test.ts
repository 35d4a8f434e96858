import { describe, expect, it, vi } from "vitest";
import { Bucket } from "../../src/bucket/bucket";
import type { ClaimResult, ExecutionRef, FireMessage } from "../../src/bucket/protocol";
import { MAX_BUCKET } from "../../src/consumer/message";
import {
  api,
  bucketStub,
  captureFiresForFile,
  createJob,
  d1Of,
  dispatchNow,
  type Execution,
  fileClock,
  fire,
  jobRow,
  KEYS,
  live,
  newExecution,
  received,
  receiverUrl,
  runAlarm,
  startFire,
  uniquePath,
} from "./helpers";

const HEAD_START_MS = 10 * 60_000;
const clock = fileClock(HEAD_START_MS);
const sent = captureFiresForFile();

type Stub = ReturnType<typeof bucketStub>;
type Lease = Extract<ClaimResult, { ok: true }>;

const OK_200 = { kind: "succeeded", httpStatus: 200, excerpt: "ok" } as const;

const dispatch = (stub: Stub, executionId: string) => dispatchNow({ stub, executionId }, clock, sent);

const dispatchExecution = (e: Execution) => dispatch(e.stub, e.exe.id);

async function claim(e: Execution, message: FireMessage): Promise<Lease> {
  const [lease] = await e.stub.claim([{ executionId: message.executionId, dueAt: message.dueAt }]);
  if (!lease?.ok) throw new Error(`claim refused: ${JSON.stringify(lease)}`);
  return lease;
}

const oneOff = (kind = "ok", extra: Record<string, unknown> = {}) =>
  newExecution({ target: { url: `${receiverUrl()}${uniquePath(kind)}` }, ...extra });

const pathOf = (e: Execution) => {
  const url = new URL(e.job.target.url);
  return url.pathname + url.search;
};

interface Metrics {
  counters: Record<string, number>;
  dead_total_by_reason: Record<string, number>;
}
const metrics = (key: string = KEYS.acme) => api("/v1/metrics", {}, key).then((r) => r.json<Metrics>());

/** A counter as stored in one bucket, over every tenant (tenant-less counters included). */
async function bucketCounter(bucket: number, name: string): Promise<number> {
  const { counters } = await bucketStub(bucket).metrics();
  return counters.filter((c) => c.name === name).reduce((sum, c) => sum + c.value, 0);
}

async function deadLetter(executionId: string) {
  return d1Of(executionId).prepare("SELECT * FROM dead_letters WHERE execution_id = ?").bind(executionId).first<Record<string, unknown>>();
}

interface DlqEntry {
  id: string;
  jobId: string;
  status: string;
  attempts: number;
  deadReason: string;
  lastError: string | null;
  lastHttpStatus: number | null;
}

/** Every entry of GET /v1/dlq for the tenant (all pages). */
async function dlq(key: string = KEYS.acme): Promise<DlqEntry[]> {
  const all: DlqEntry[] = [];
  let cursor: string | null = null;
  for (let page = 0; page < 100; page++) {
    const res = await api(`/v1/dlq?limit=200${cursor ? `&cursor=${cursor}` : ""}`, {}, key);
    expect(res.status).toBe(200);
    const body = await res.json<{ executions: DlqEntry[]; nextCursor: string | null }>();
    all.push(...body.executions);
    cursor = body.nextCursor;
    if (cursor === null) return all;
  }
  throw new Error("the DLQ kept paging");
}

const redrive = (id: string) => api(`/v1/executions/${id}/redrive`, { method: "POST" });

/** fire(), also returning the delay each retried message asked for. */
async function fireWithDelays(bodies: unknown[], options: { queue?: string; attempts?: number } = {}) {
  const run = await startFire(bodies, options);
  return { result: await run.done, delays: run.retried };
}

describe("poison messages (DLQ consumer)", () => {
  it("marks the dispatch a dead-lettered fire message names dead with reason poison and acks it (failure row: poison)", async () => {
    const e = await oneOff();
    const message = await dispatchExecution(e);
    const before = await metrics();

    const result = await fire([message], { queue: "fire-dlq", attempts: 1 });
    expect(result.explicitAcks).toEqual(["m0"]);
    expect(result.retryMessages).toEqual([]);

    expect(await e.view()).toMatchObject({ status: "dead", attempts: 0 });
    expect((await e.view())!.lastError).toContain("queue consumer failed");
    const after = await metrics();
    expect((after.dead_total_by_reason.poison ?? 0) - (before.dead_total_by_reason.poison ?? 0)).toBe(1);
    expect((after.counters.dead_total ?? 0) - (before.counters.dead_total ?? 0)).toBe(1);

    // its outcome reaches D1 at the next flush: the job row and the dead-letter list
    await clock.flush(e.stub);
    expect(await jobRow(e.job.id)).toMatchObject({ status: "completed", run_status: "dead", dead_reason: "poison", attempts: 0 });
    expect((await jobRow(e.job.id))!.last_error).toContain("queue consumer failed");
    expect(await deadLetter(e.exe.id)).toMatchObject({ job_id: e.job.id, dead_reason: "poison", attempts: 0, redrive_at: null });
    expect(await e.view()).toBeUndefined();
    expect(await received(pathOf(e))).toHaveLength(0);
  });

  it("changes nothing for an execution under a lease: the running attempt's report stands (failure row: poison)", async () => {
    const e = await oneOff();
    const message = await dispatchExecution(e);
    const lease = await claim(e, message);
    const before = await metrics();

    expect((await fire([message], { queue: "fire-dlq" })).explicitAcks).toEqual(["m0"]);
    expect((await e.view())?.status).toBe("running");
    const after = await metrics();
    expect((after.counters.dead_total ?? 0) - (before.counters.dead_total ?? 0)).toBe(0);

    // the lease holder is still the one the bucket listens to
    const [done] = await e.stub.complete([{ executionId: e.exe.id, token: lease.token, outcome: OK_200 }]);
    expect(done).toEqual({ ok: true, executionId: e.exe.id, status: "succeeded" });
    await clock.flush(e.stub);
    expect(await jobRow(e.job.id)).toMatchObject({ status: "completed", run_status: "succeeded", attempts: 1, dead_reason: null });
    expect(await deadLetter(e.exe.id)).toBeNull();
  });

  it("changes nothing with an old DLQ message for an execution waiting for a retry backoff; only the current dispatch's message kills it", async () => {
    const e = await oneOff("fail/503", { retry: { maxAttempts: 5, initialDelayMs: 5_000, jitter: 0 } });
    const first = await dispatchExecution(e);
    expect((await fire([first])).explicitAcks).toEqual(["m0"]);
    const waiting = (await e.view())!;
    expect(waiting).toMatchObject({ status: "scheduled", attempts: 1, lastHttpStatus: 503 });
    expect(waiting.dueAt).toBe(first.dueAt + 5_000);
    const before = await metrics();

    // the queue gives up on the first dispatch's message while the retry waits: nothing changes
    const old = await fire([first], { queue: "fire-dlq" });
    expect(old.explicitAcks).toEqual(["m0"]);
    expect(old.retryMessages).toEqual([]);
    expect(await e.view()).toEqual(waiting);

    // nor once the retry is dispatched (another due time, another message)
    const second = await dispatch(e.stub, e.exe.id);
    expect(second.dueAt).toBe(waiting.dueAt);
    expect((await fire([first], { queue: "fire-dlq" })).explicitAcks).toEqual(["m0"]);
    expect((await e.view())?.status).toBe("dispatched");
    expect(((await metrics()).counters.dead_total ?? 0) - (before.counters.dead_total ?? 0)).toBe(0);

    // the message of the dispatch on its way does name it: that one is poison
    expect((await fire([second], { queue: "fire-dlq" })).explicitAcks).toEqual(["m0"]);
    expect(await e.view()).toMatchObject({ status: "dead", attempts: 1 });
    const after = await metrics();
    expect((after.dead_total_by_reason.poison ?? 0) - (before.dead_total_by_reason.poison ?? 0)).toBe(1);
    await clock.flush(e.stub);
    expect(await jobRow(e.job.id)).toMatchObject({ run_status: "dead", dead_reason: "poison", attempts: 1 });
    expect(await received(pathOf(e))).toHaveLength(1);
  });

  it("acks a DLQ message for an already terminal or unknown execution and changes nothing", async () => {
    const e = await oneOff();
    const message = await dispatchExecution(e);
    expect((await fire([message])).explicitAcks).toEqual(["m0"]);
    expect((await e.view())?.status).toBe("succeeded");
    const before = await metrics();

    const unknown: FireMessage = { ...message, executionId: "exe_0000000000zzzzzzzzzzzzzzzz" };
    // terminal, its outcome still on its way to D1
    const result = await fire([message, unknown], { queue: "fire-dlq" });
    expect(result.explicitAcks.sort()).toEqual(["m0", "m1"]);
    expect(result.retryMessages).toEqual([]);
    expect((await e.view())?.status).toBe("succeeded");

    // terminal and gone from the bucket
    await clock.flush(e.stub);
    const done = await jobRow(e.job.id);
    expect(done).toMatchObject({ status: "completed", run_status: "succeeded" });
    expect((await fire([message], { queue: "fire-dlq" })).explicitAcks).toEqual(["m0"]);
    expect(await jobRow(e.job.id)).toEqual(done);
    expect(await deadLetter(e.exe.id)).toBeNull();
    const after = await metrics();
    expect(after.counters.dead_total ?? 0).toBe(before.counters.dead_total ?? 0);
    expect(after.dead_total_by_reason).toEqual(before.dead_total_by_reason);
  });

  it("acks malformed DLQ messages without affecting the others in the batch, and counts them", async () => {
    const e = await oneOff();
    const message = await dispatchExecution(e);
    const before = await bucketCounter(0, "malformed_messages_total");
    const result = await fire([{ nonsense: true }, message, { ...message, bucket: MAX_BUCKET }], { queue: "fire-dlq" });
    expect(result.explicitAcks.sort()).toEqual(["m0", "m1", "m2"]);
    expect(result.retryMessages).toEqual([]);
    expect(await e.view()).toMatchObject({ status: "dead" });
    // counted like the fire consumer's (both go through consumer/message.ts)
    expect((await bucketCounter(0, "malformed_messages_total")) - before).toBe(2);
  });

  it("retries a DLQ batch whose markPoisoned RPC fails, and kills on the redelivery", async () => {
    const e = await oneOff();
    const message = await dispatchExecution(e);
    const spy = vi.spyOn(Bucket.prototype, "markPoisoned").mockRejectedValue(new Error("bucket unavailable"));
    const result = await fire([message], { queue: "fire-dlq" }).finally(() => spy.mockRestore());
    expect(result.explicitAcks).toEqual([]);
    expect(result.retryMessages.map((m) => m.msgId)).toEqual(["m0"]);
    expect((await e.view())?.status).toBe("dispatched");

    expect((await fire([message], { queue: "fire-dlq", attempts: 2 })).explicitAcks).toEqual(["m0"]);
    expect(await e.view()).toMatchObject({ status: "dead" });
  });
});

describe("fire consumer acks and retries", () => {
  it("retries with a growing delay the messages whose claim RPC fails and acks the rest of the batch (failure row: poison, first stage)", async () => {
    const failing = await oneOff();
    let healthy = await oneOff();
    for (let i = 0; i < 30 && healthy.exe.bucket === failing.exe.bucket; i++) healthy = await oneOff();
    expect(healthy.exe.bucket).not.toBe(failing.exe.bucket);
    const failingMessage = await dispatchExecution(failing);
    const healthyMessage = await dispatchExecution(healthy);

    // the failing execution's bucket cannot answer the claim (an unreachable or crashing object)
    const realClaim = Bucket.prototype.claim;
    const spy = vi.spyOn(Bucket.prototype, "claim").mockImplementation(async function (this: Bucket, refs: ExecutionRef[]) {
      if (refs.some((r) => r.executionId === failing.exe.id)) throw new Error("bucket unavailable");
      return realClaim.call(this, refs);
    });
    let first: Awaited<ReturnType<typeof fireWithDelays>>;
    let third: Awaited<ReturnType<typeof fireWithDelays>>;
    try {
      first = await fireWithDelays([failingMessage, healthyMessage]);
      // a later delivery of the same message waits longer (2, 4, 8, ... s)
      third = await fireWithDelays([failingMessage], { attempts: 3 });
    } finally {
      spy.mockRestore();
    }

    expect(first.result.retryMessages.map((m) => m.msgId)).toEqual(["m0"]);
    expect(first.result.explicitAcks).toEqual(["m1"]);
    expect(first.delays).toEqual([{ msgId: "m0", delaySeconds: 2 }]);
    expect(third.result.retryMessages.map((m) => m.msgId)).toEqual(["m0"]);
    expect(third.result.explicitAcks).toEqual([]);
    expect(third.delays).toEqual([{ msgId: "m0", delaySeconds: 8 }]);
    expect((await failing.view())?.status).toBe("dispatched");
    expect((await healthy.view())?.status).toBe("succeeded");

    // the queue's redelivery finds the execution untouched and runs it
    const again = await fire([failingMessage], { attempts: 4 });
    expect(again.explicitAcks).toEqual(["m0"]);
    expect(again.retryMessages).toEqual([]);
    expect((await failing.view())?.status).toBe("succeeded");
    expect(await received(pathOf(failing))).toHaveLength(1);
  });

  it("acks and counts malformed fire messages without affecting the others in the batch", async () => {
    const e = await oneOff();
    const message = await dispatchExecution(e);
    const before = await bucketCounter(0, "malformed_messages_total");
    const malformed: unknown[] = [
      { hello: "world" }, // wrong shape
      "exe_not_a_message", // not an object
      { ...message, v: 2 }, // unknown version
      { ...message, executionId: "exe_NOT-A-VALID-ID" }, // unknown execution id format
      { ...message, executionId: e.job.id }, // a job id is not an execution id
      { ...message, bucket: MAX_BUCKET }, // beyond any configuration (a bucket beyond BUCKETS is still consumed)
      { ...message, bucket: -1 },
      { ...message, dueAt: undefined }, // a fire message names its due time
    ];
    const result = await fire([...malformed, message]);
    expect(result.explicitAcks.sort()).toEqual(["m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8"]);
    expect(result.retryMessages).toEqual([]);
    expect((await bucketCounter(0, "malformed_messages_total")) - before).toBe(malformed.length);
    expect((await e.view())?.status).toBe("succeeded");
    expect(await received(pathOf(e))).toHaveLength(1);
  });
});

describe("redrive and the DLQ API", () => {
  it("redrives a dead one-off job with a fresh attempt budget: active again, it runs and completes again (failure row: target keeps failing)", async () => {
    const e = await oneOff("flaky/1", { retry: { maxAttempts: 1, initialDelayMs: 1000, jitter: 0 } }); // fails once, then 200
    expect((await fire([await dispatchExecution(e)])).explicitAcks).toEqual(["m0"]);
    expect(await e.view()).toMatchObject({ status: "dead", attempts: 1, lastHttpStatus: 503 });
    await clock.flush(e.stub);
    const dead = (await jobRow(e.job.id))!;
    expect(dead).toMatchObject({ status: "completed", run_status: "dead", dead_reason: "attempts_exhausted", attempts: 1 });
    expect(await dlq()).toContainEqual(
      expect.objectContaining({ id: e.exe.id, jobId: e.job.id, status: "dead", attempts: 1, deadReason: "attempts_exhausted" }),
    );

    const res = await redrive(e.exe.id);
    expect(res.status).toBe(202);
    expect(await res.json()).toMatchObject({ id: e.exe.id, status: "scheduled", redriven: true });
    expect(await jobRow(e.job.id)).toMatchObject({ status: "active", version: dead.version + 1, next_run_at: clock.at });
    expect((await dlq()).map((x) => x.id)).not.toContain(e.exe.id);
    // the bucket holds it again, due now, its budget starting after the attempt already used
    expect(await e.view()).toMatchObject({ status: "scheduled", attempts: 1, dueAt: clock.at });

    // a second redrive of an execution that is not dead
    const twice = await redrive(e.exe.id);
    expect(twice.status).toBe(409);
    expect(await twice.json()).toMatchObject({ error: { code: "not_dead", field: "id" } });

    const again = await dispatchExecution(e);
    expect((await fire([again])).explicitAcks).toEqual(["m0"]);
    expect(await e.view()).toMatchObject({ status: "succeeded", attempts: 2 });
    await clock.flush(e.stub);
    const done = (await jobRow(e.job.id))!;
    expect(done).toMatchObject({ status: "completed", run_status: "succeeded", attempts: 2, dead_reason: null });
    expect((JSON.parse(done.attempt_log!) as { attempt: number; httpStatus: number }[]).at(-1)).toMatchObject({
      attempt: 2,
      httpStatus: 200,
      outcome: "succeeded",
    });
    expect((await received(pathOf(e))).map((r) => r.headers["x-scheduler-attempt"])).toEqual(["1", "2"]);
    expect((await redrive(e.exe.id)).status).toBe(409);
  });

  it("counts a one-off job's redrive in redrive_total (dead executions given a fresh attempt budget)", async () => {
    const e = await oneOff("fail/404");
    expect((await fire([await dispatchExecution(e)])).explicitAcks).toEqual(["m0"]);
    await clock.flush(e.stub);
    expect(await jobRow(e.job.id)).toMatchObject({ run_status: "dead", dead_reason: "permanent" });
    const before = await metrics();
    expect((await redrive(e.exe.id)).status).toBe(202);
    expect(await e.view()).toMatchObject({ status: "scheduled", attempts: 1 });
    expect((await metrics()).counters.redrive_total ?? 0).toBe((before.counters.redrive_total ?? 0) + 1);
    await api(`/v1/jobs/${e.job.id}`, { method: "DELETE" });
  });

  it("keeps the attempts made before a redrive in the execution's history (README: each execution with its attempts)", async () => {
    const e = await oneOff("flaky/1", { retry: { maxAttempts: 1, initialDelayMs: 1000, jitter: 0 } });
    expect((await fire([await dispatchExecution(e)])).explicitAcks).toEqual(["m0"]);
    await clock.flush(e.stub);
    expect((await redrive(e.exe.id)).status).toBe(202);
    expect((await fire([await dispatchExecution(e)])).explicitAcks).toEqual(["m0"]);
    await clock.flush(e.stub);
    expect(await jobRow(e.job.id)).toMatchObject({ run_status: "succeeded", attempts: 2 });
    const res = await api(`/v1/jobs/${e.job.id}/executions`);
    const [execution] = (
      await res.json<{ executions: { id: string; attempts: { attempt: number; outcome: string; httpStatus: number | null }[] }[] }>()
    ).executions;
    expect(execution!.id).toBe(e.exe.id);
    expect(execution!.attempts.map((a) => [a.attempt, a.outcome, a.httpStatus])).toEqual([
      [1, "retryable", 503],
      [2, "succeeded", 200],
    ]);
  });

  it("redrives a recurring job's dead occurrence with a fresh attempt budget; it runs again (failure row: target keeps failing)", async () => {
    const path = uniquePath("flaky/1");
    const job = await createJob({
      target: { url: `${receiverUrl()}${path}` },
      cron: "* * * * *",
      retry: { maxAttempts: 1, initialDelayMs: 1000, jitter: 0 },
    });
    try {
      const row = (await jobRow(job.id))!;
      const stub = bucketStub(row.bucket);
      const occurrenceAt = row.next_run_at!;
      clock.travelTo(Math.max(clock.at, occurrenceAt));
      const before = sent.length;
      await runAlarm(stub);
      const message = sent.slice(before).find((m) => m.dueAt === occurrenceAt);
      if (!message) throw new Error("the occurrence was not dispatched");
      const id = message.executionId;
      expect((await fire([message])).explicitAcks).toEqual(["m0"]);
      expect(await live(stub, id)).toMatchObject({ status: "dead", attempts: 1, occurrenceAt });
      await clock.flush(stub);
      const occurrence = await d1Of(id).prepare("SELECT * FROM occurrences WHERE id = ?").bind(id).first();
      expect(occurrence).toMatchObject({
        job_id: job.id,
        status: "dead",
        attempts: 1,
        dead_reason: "attempts_exhausted",
        due_at: occurrenceAt,
      });
      expect(await dlq()).toContainEqual(
        expect.objectContaining({ id, jobId: job.id, attempts: 1, deadReason: "attempts_exhausted", lastHttpStatus: 503 }),
      );
      const counted = await metrics();

      const res = await redrive(id);
      expect(res.status).toBe(202);
      expect(await res.json()).toMatchObject({ id, status: "scheduled", redriven: true });
      expect(await deadLetter(id)).toBeNull();
      expect((await dlq()).map((x) => x.id)).not.toContain(id);
      expect(await live(stub, id)).toMatchObject({ status: "scheduled", attempts: 1, dueAt: clock.at, occurrenceAt });
      expect((await metrics()).counters.redrive_total ?? 0).toBe((counted.counters.redrive_total ?? 0) + 1);
      const twice = await redrive(id);
      expect(twice.status).toBe(409);
      expect(await twice.json()).toMatchObject({ error: { code: "not_dead" } });

      const again = await dispatch(stub, id);
      expect((await fire([again])).explicitAcks).toEqual(["m0"]);
      expect(await live(stub, id)).toMatchObject({ status: "succeeded", attempts: 2 });
      await clock.flush(stub);
      expect(await d1Of(id).prepare("SELECT * FROM occurrences WHERE id = ?").bind(id).first()).toMatchObject({
        status: "succeeded",
        attempts: 2,
        dead_reason: null,
        due_at: occurrenceAt,
      });
      expect((await received(path)).map((r) => r.headers["x-scheduler-attempt"])).toEqual(["1", "2"]);
      expect((await redrive(id)).status).toBe(409);
      expect((await jobRow(job.id))!.status).toBe("active");
    } finally {
      await api(`/v1/jobs/${job.id}`, { method: "DELETE" });
    }
  });

  it("refuses to redrive an execution that is not dead (409)", async () => {
    const e = await oneOff("ok", { delay: "60s" });
    const res = await redrive(e.exe.id);
    expect(res.status).toBe(409);
    expect(await res.json()).toMatchObject({ error: { code: "not_dead", field: "id" } });
    expect((await e.view())?.status).toBe("scheduled");
    expect((await redrive("exe_0000000000zzzzzzzzzzzzzzzz")).status).toBe(404);
  });

  it("lists dead executions with reason, attempts and last error, page by page with the cursor", async () => {
    const mine: Execution[] = [];
    const messages: FireMessage[] = [];
    for (let i = 0; i < 3; i++) {
      const e = await oneOff();
      messages.push(await dispatchExecution(e));
      mine.push(e);
    }
    expect((await fire(messages, { queue: "fire-dlq" })).explicitAcks).toHaveLength(3);
    for (const bucket of new Set(mine.map((e) => e.exe.bucket))) await clock.flush(bucketStub(bucket));

    type Page = { executions: DlqEntry[]; nextCursor: string | null };
    const seen: DlqEntry[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 100; page++) {
      const res = await api(`/v1/dlq?limit=2${cursor ? `&cursor=${cursor}` : ""}`);
      expect(res.status).toBe(200);
      const body = await res.json<Page>();
      expect(body.executions.length).toBeLessThanOrEqual(2);
      seen.push(...body.executions);
      cursor = body.nextCursor;
      if (cursor === null) break;
    }
    expect(cursor).toBeNull();
    const ids = seen.map((x) => x.id);
    expect(new Set(ids).size).toBe(ids.length); // no row on two pages
    expect(seen.every((x) => x.status === "dead")).toBe(true);
    for (const e of mine) {
      const listed = seen.find((x) => x.id === e.exe.id);
      expect(listed).toMatchObject({ jobId: e.job.id, status: "dead", attempts: 0, deadReason: "poison" });
      expect(listed!.lastError).toContain("queue consumer failed");
    }
    // another tenant sees none of them; a cursor this API never gave is a 400
    const other = await dlq(KEYS.globex);
    expect(other.filter((x) => mine.some((e) => e.exe.id === x.id))).toEqual([]);
    const bad = await api("/v1/dlq?cursor=not-a-cursor");
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ error: { field: "cursor" } });
  });
});
