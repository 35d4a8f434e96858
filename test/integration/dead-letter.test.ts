/**
 * The dead-letter path and the consumer's per-message ack/retry: failure rows "consumer crashes
 * on a message every time (poison)" and "target keeps failing" (DLQ API, redrive), plus the
 * consumer's handling of malformed messages and of an unreachable bucket.
 *
 * The fire queue binding is replaced for the whole file (sends are captured, never consumed in
 * the background); the consumers run only when a test calls fire().
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { Bucket } from "../../src/bucket/bucket";
import type { FireMessage } from "../../src/env";
import {
  api,
  bucketAttempts,
  bucketRow,
  bucketSql,
  bucketStub,
  createJob,
  executionOf,
  fire,
  fireMessage,
  KEYS,
  received,
  receiverUrl,
  uniquePath,
  captureFiresForFile,
  newExecution,
  runAlarm,
  type Execution,
} from "./helpers";

const sent = captureFiresForFile();



async function dispatchNow(e: Execution): Promise<void> {
  await bucketSql(e.stub, "UPDATE executions SET due_at = ? WHERE id = ?", Date.now() - 1, e.exe.id);
  await runAlarm(e.stub);
  expect((await e.row()).status).toBe("dispatched");
}

/** Flushes the bucket's mirror to D1 now (the mirror runs at most once per MIRROR_DELAY_MS). */
function mirrorNow(stub: ReturnType<typeof bucketStub>): Promise<void> {
  return runInDurableObject(stub, async (instance: Bucket) => {
    (instance as unknown as { lastMirrorAt: number }).lastMirrorAt = 0;
    await instance.alarm();
  });
}

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

describe("poison messages (DLQ consumer)", () => {
  it("marks the execution of a dead-lettered fire message dead with reason poison and acks it (failure row: poison)", async () => {
    const path = uniquePath();
    const e = await newExecution({ target: { url: `${receiverUrl()}${path}` } });
    await dispatchNow(e);
    const before = await metrics();

    const result = await fire([e.message], { queue: "fire-dlq", attempts: 1 });
    expect(result.explicitAcks).toEqual(["m0"]);
    expect(result.retryMessages).toEqual([]);

    expect(await e.row()).toMatchObject({ status: "dead", dead_reason: "poison", dispatch_deadline_at: null });
    expect((await e.row()).last_error).toContain("queue consumer failed");
    const after = await metrics();
    expect((after.dead_total_by_reason.poison ?? 0) - (before.dead_total_by_reason.poison ?? 0)).toBe(1);
    expect(after.counters.dead_total! - before.counters.dead_total!).toBe(1);
    expect(await received(path)).toHaveLength(0);
  });

  it("closes the running attempt of a poisoned execution (failure row: poison)", async () => {
    const e = await newExecution({ target: { url: `${receiverUrl()}${uniquePath()}` } });
    await dispatchNow(e);
    const [lease] = await e.stub.claim([e.exe.id]);
    if (!lease?.ok) throw new Error("claim refused");
    expect((await fire([e.message], { queue: "fire-dlq" })).explicitAcks).toEqual(["m0"]);
    expect(await e.row()).toMatchObject({ status: "dead", dead_reason: "poison", lease_token: null });
    const [attempt] = await bucketAttempts(e.stub, e.exe.id);
    expect(attempt).toMatchObject({ attempt: 1, outcome: "poison" });
    expect(attempt!.finished_at).not.toBeNull();
    // the poisoned worker's late report is a stale lease: it cannot resurrect the execution
    const [late] = await e.stub.complete([{ executionId: e.exe.id, token: lease.token, outcome: { kind: "succeeded", httpStatus: 200, excerpt: "" } }]);
    expect(late).toMatchObject({ ok: false, code: "stale_lease" });
    expect((await e.row()).status).toBe("dead");
  });

  it("acks a DLQ message for an already terminal or unknown execution and changes nothing", async () => {
    const e = await newExecution({ target: { url: `${receiverUrl()}${uniquePath()}` } });
    await dispatchNow(e);
    expect((await fire([e.message])).explicitAcks).toEqual(["m0"]);
    const done = await e.row();
    expect(done.status).toBe("succeeded");
    const before = await metrics();

    const unknown = fireMessage({ id: "exe_0000000000zzzzzzzzzzzzzzzz", bucket: e.exe.bucket });
    const result = await fire([e.message, unknown], { queue: "fire-dlq" });
    expect(result.explicitAcks.sort()).toEqual(["m0", "m1"]);
    expect(result.retryMessages).toEqual([]);
    expect(await e.row()).toEqual(done);
    expect(await metrics()).toEqual(before);
  });

  it("acks malformed DLQ messages without affecting the others in the batch, and counts them", async () => {
    const e = await newExecution({ target: { url: `${receiverUrl()}${uniquePath()}` } });
    await dispatchNow(e);
    const before = await bucketCounter(0, "malformed_messages_total");
    const result = await fire([{ nonsense: true }, e.message, { ...e.message, bucket: 99 }], { queue: "fire-dlq" });
    expect(result.explicitAcks.sort()).toEqual(["m0", "m1", "m2"]);
    expect(result.retryMessages).toEqual([]);
    expect(await e.row()).toMatchObject({ status: "dead", dead_reason: "poison" });
    // counted like the fire consumer's (both go through consumer/message.ts)
    expect((await bucketCounter(0, "malformed_messages_total")) - before).toBe(2);
  });
});

describe("fire consumer acks and retries", () => {
  it("retries the messages whose claim RPC fails and acks the rest of the batch (failure row: poison, first stage)", async () => {
    const failing = await newExecution({ target: { url: `${receiverUrl()}${uniquePath()}` } });
    let healthy = await newExecution({ target: { url: `${receiverUrl()}${uniquePath()}` } });
    for (let i = 0; i < 30 && healthy.exe.bucket === failing.exe.bucket; i++) {
      healthy = await newExecution({ target: { url: `${receiverUrl()}${uniquePath()}` } });
    }
    expect(healthy.exe.bucket).not.toBe(failing.exe.bucket);
    await dispatchNow(failing);
    await dispatchNow(healthy);

    // the failing execution's bucket cannot answer the claim (an unreachable or crashing object)
    const claim = Bucket.prototype.claim;
    const spy = vi.spyOn(Bucket.prototype, "claim").mockImplementation(async function (this: Bucket, ids: string[]) {
      if (ids.includes(failing.exe.id)) throw new Error("bucket unavailable");
      return claim.call(this, ids);
    });
    const result = await fire([failing.message, healthy.message]).finally(() => spy.mockRestore());

    expect(result.retryMessages).toEqual([{ msgId: "m0" }]);
    expect(result.explicitAcks).toEqual(["m1"]);
    expect((await failing.row()).status).toBe("dispatched");
    expect((await healthy.row()).status).toBe("succeeded");

    // the queue's redelivery finds the execution untouched and runs it
    const again = await fire([failing.message], { attempts: 2 });
    expect(again.explicitAcks).toEqual(["m0"]);
    expect((await failing.row()).status).toBe("succeeded");
  });

  it("acks and counts malformed fire messages without affecting the others in the batch", async () => {
    const path = uniquePath();
    const e = await newExecution({ target: { url: `${receiverUrl()}${path}` } });
    await dispatchNow(e);
    const before = await bucketCounter(0, "malformed_messages_total");
    const malformed: unknown[] = [
      { hello: "world" }, // wrong shape
      "exe_not_a_message", // not an object
      { ...e.message, v: 2 }, // unknown version
      { ...e.message, executionId: "exe_NOT-A-VALID-ID" }, // unknown execution id format
      { ...e.message, executionId: e.job.id }, // a job id is not an execution id
      { ...e.message, bucket: 4 }, // BUCKETS is 4: out of range
      { ...e.message, bucket: -1 },
    ];
    const result = await fire([...malformed, e.message]);
    expect(result.explicitAcks.sort()).toEqual(["m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7"]);
    expect(result.retryMessages).toEqual([]);
    expect((await bucketCounter(0, "malformed_messages_total")) - before).toBe(malformed.length);
    expect((await e.row()).status).toBe("succeeded");
    expect(await received(path)).toHaveLength(1);
  });
});

describe("redrive and the DLQ API", () => {
  it("redrives a dead execution with a fresh attempt budget; it runs again on the next alarm (failure row: target keeps failing)", async () => {
    const path = uniquePath("flaky/1"); // fails once, then answers 200
    const e = await newExecution({ target: { url: `${receiverUrl()}${path}` }, retry: { maxAttempts: 1, initialDelayMs: 1000, jitter: 0 } });
    await dispatchNow(e);
    expect((await fire([e.message])).explicitAcks).toEqual(["m0"]);
    expect(await e.row()).toMatchObject({ status: "dead", dead_reason: "attempts_exhausted", attempt: 1, budget_base: 0 });
    const before = await metrics();
    const sendsBefore = sent.filter((m) => m.executionId === e.exe.id).length;

    const res = await api(`/v1/executions/${e.exe.id}/redrive`, { method: "POST" });
    expect(res.status).toBe(202);
    expect(await res.json()).toMatchObject({ id: e.exe.id, status: "scheduled", redriven: true });
    const row = await e.row();
    // a due-now row may already have been dispatched by the bucket's own alarm
    expect(["scheduled", "dispatched"]).toContain(row.status);
    expect(row).toMatchObject({ attempt: 1, budget_base: 1, dead_reason: null, finished_at: null });
    expect(row.due_at).toBeLessThanOrEqual(Date.now());
    expect((await metrics()).counters.redrive_total! - before.counters.redrive_total!).toBe(1);

    await runAlarm(e.stub);
    expect((await e.row()).status).toBe("dispatched");
    expect(sent.filter((m) => m.executionId === e.exe.id).length).toBe(sendsBefore + 1);
    expect((await fire([e.message])).explicitAcks).toEqual(["m0"]);
    expect(await e.row()).toMatchObject({ status: "succeeded", attempt: 2 });
    expect((await received(path)).map((r) => r.headers["x-scheduler-attempt"])).toEqual(["1", "2"]);
  });

  it("refuses to redrive an execution that is not dead (409)", async () => {
    const e = await newExecution({ target: { url: `${receiverUrl()}${uniquePath()}` }, delay: "60s" });
    const res = await api(`/v1/executions/${e.exe.id}/redrive`, { method: "POST" });
    expect(res.status).toBe(409);
    expect(await res.json()).toMatchObject({ error: { code: "not_dead", field: "id" } });
    expect((await e.row()).status).toBe("scheduled");
    expect((await api("/v1/executions/exe_0000000000zzzzzzzzzzzzzzzz/redrive", { method: "POST" })).status).toBe(404);
  });

  it("lists dead executions with reason, attempts and last error, page by page with the cursor", async () => {
    const mine: Execution[] = [];
    for (let i = 0; i < 3; i++) {
      const e = await newExecution({ target: { url: `${receiverUrl()}${uniquePath()}` } });
      await dispatchNow(e);
      mine.push(e);
    }
    expect((await fire(mine.map((e) => e.message), { queue: "fire-dlq" })).explicitAcks).toHaveLength(3);
    for (const bucket of new Set(mine.map((e) => e.exe.bucket))) await mirrorNow(bucketStub(bucket));

    type Page = { executions: { id: string; status: string; attempts: number; deadReason: string; lastError: string }[]; nextCursor: string | null };
    const seen: Page["executions"] = [];
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
      expect(listed).toMatchObject({ status: "dead", attempts: 0, deadReason: "poison" });
      expect(listed!.lastError).toContain("queue consumer failed");
    }
    // another tenant sees none of them; a cursor this API never gave is a 400
    const other = await api("/v1/dlq?limit=200", {}, KEYS.globex).then((r) => r.json<Page>());
    expect(other.executions.filter((x) => mine.some((e) => e.exe.id === x.id))).toEqual([]);
    const bad = await api("/v1/dlq?cursor=not-a-cursor");
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ error: { field: "cursor" } });
  });
});
