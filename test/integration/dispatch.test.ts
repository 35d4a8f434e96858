/**
 * The alarm's dispatch: failure rows "queue send fails inside the alarm" (rows stay scheduled,
 * dispatch_errors_total) and "message lost or never consumed" (re-dispatch after the dispatch
 * deadline, redispatch_total; dead "undeliverable" after MAX_DISPATCHES).
 *
 * The bucket's queue binding is the very object the test sees as env.FIRE_QUEUE_0 (the Durable
 * Object runs in the test isolate), so one spy on its sendBatch captures every send, or fails the
 * sends a test chooses. Nothing reaches the real queue, so nothing is consumed in the background.
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Bucket } from "../../src/bucket/bucket";
import { configOf } from "../../src/config";
import type { MetricsSummary } from "../../src/core/metrics";
import type { FireMessage } from "../../src/env";
import {
  alarmOf,
  api,
  bucketRow,
  bucketSql,
  bucketStub,
  createJob,
  executionOf,
  fire,
  fireMessage,
  received,
  receiverUrl,
  uniquePath,
  withClockAhead,
} from "./helpers";

const { MAX_DISPATCHES, DISPATCH_TIMEOUT_MS } = configOf(env);

const sent: FireMessage[] = [];
/** Sends of a batch holding one of these execution ids fail, as a queue outage would. */
const failSendsFor = new Set<string>();
beforeAll(() => {
  vi.spyOn(env.FIRE_QUEUE_0!, "sendBatch").mockImplementation(async (messages) => {
    const batch = [...messages];
    if (batch.some((m) => failSendsFor.has(m.body.executionId))) throw new Error("queue unavailable");
    for (const m of batch) sent.push(m.body);
    return { metadata: { metrics: { backlogCount: 0, backlogBytes: 0 } } };
  });
});
afterAll(() => vi.restoreAllMocks());

const sentFor = (executionId: string) => sent.filter((m) => m.executionId === executionId).length;

/**
 * A job due in 60 s (no alarm fires it on its own during the test), made due by backdating.
 * `failSends` is set before the backdate: a background alarm of the bucket may run at any time.
 */
async function dueExecution(options: { failSends?: boolean } = {}) {
  const path = uniquePath();
  const job = await createJob({ target: { url: `${receiverUrl()}${path}` }, delay: "60s" });
  const exe = (await executionOf(job.id))!;
  const stub = bucketStub(exe.bucket);
  if (options.failSends) failSendsFor.add(exe.id);
  await bucketSql(stub, "UPDATE executions SET due_at = ? WHERE id = ?", Date.now() - 1, exe.id);
  return { job, exe, stub, path, row: async () => (await bucketRow(stub, exe.id))!, message: fireMessage(exe) };
}

function runAlarm(stub: ReturnType<typeof bucketStub>): Promise<void> {
  return runInDurableObject(stub, (instance: Bucket) => instance.alarm());
}

/**
 * After a failed send the bucket holds all its dispatches back for a moment (in memory,
 * dispatchRetryAt); forget it so later tests in this file that share the bucket are unaffected.
 */
function forgetSendFailure(stub: ReturnType<typeof bucketStub>): Promise<void> {
  return runInDurableObject(stub, (instance: Bucket) => {
    (instance as unknown as { dispatchRetryAt: number }).dispatchRetryAt = 0;
  });
}

const metrics = () => api("/v1/metrics").then((r) => r.json<MetricsSummary>());
const diff = (a: MetricsSummary, b: MetricsSummary, name: string) => (b.counters[name] ?? 0) - (a.counters[name] ?? 0);

describe("queue send failure", () => {
  it("leaves rows scheduled and counts dispatch_errors_total when the send fails; a later alarm sends them (failure row: queue send fails)", async () => {
    const before = await metrics();
    const e = await dueExecution({ failSends: true });
    try {
      await runAlarm(e.stub); // resolves: the alarm catches its own failures and re-arms
    } finally {
      failSendsFor.delete(e.exe.id);
    }
    expect(await e.row()).toMatchObject({ status: "scheduled", dispatch_count: 0, dispatch_deadline_at: null });
    expect(sentFor(e.exe.id)).toBe(0);
    const failed = await metrics();
    expect(diff(before, failed, "dispatch_errors_total")).toBe(1);
    expect(diff(before, failed, "fired_total")).toBe(0);
    expect(await alarmOf(e.stub)).not.toBeNull();

    // the queue is back; the bucket waits a moment before sending again, then sends
    await withClockAhead(2_000, () => runAlarm(e.stub));
    expect(await e.row()).toMatchObject({ status: "dispatched", dispatch_count: 1 });
    expect(sentFor(e.exe.id)).toBe(1);
    expect(diff(failed, await metrics(), "fired_total")).toBe(1);
    expect((await fire([e.message])).explicitAcks).toEqual(["m0"]);
    expect((await e.row()).status).toBe("succeeded");
    expect(await received(e.path)).toHaveLength(1);
    await forgetSendFailure(e.stub);
  });

  it("keeps a re-dispatch whose send fails dispatched, to be sent at the next deadline (failure row: queue send fails)", async () => {
    const e = await dueExecution();
    await runAlarm(e.stub);
    expect(await e.row()).toMatchObject({ status: "dispatched", dispatch_count: 1 });
    const before = await metrics();

    failSendsFor.add(e.exe.id);
    await bucketSql(e.stub, "UPDATE executions SET dispatch_deadline_at = ? WHERE id = ?", Date.now() - 1, e.exe.id);
    try {
      await runAlarm(e.stub);
    } finally {
      failSendsFor.delete(e.exe.id);
    }
    await forgetSendFailure(e.stub);
    const row = await e.row();
    expect(row.status).toBe("dispatched");
    expect(row.dispatch_deadline_at).toBeGreaterThan(Date.now());
    expect(diff(before, await metrics(), "dispatch_errors_total")).toBe(1);
    expect((await fire([e.message])).explicitAcks).toEqual(["m0"]);
    expect((await e.row()).status).toBe("succeeded");
  });
});

describe("lost messages", () => {
  it("re-dispatches an execution whose dispatch deadline passed unclaimed (failure row: message lost)", async () => {
    const e = await dueExecution();
    await runAlarm(e.stub);
    const first = await e.row();
    expect(first).toMatchObject({ status: "dispatched", dispatch_count: 1 });
    expect(first.dispatch_deadline_at).toBeGreaterThanOrEqual(Date.now() + DISPATCH_TIMEOUT_MS - 1000);
    expect(sentFor(e.exe.id)).toBe(1);
    const before = await metrics();

    // the message is lost: nobody claims it before the deadline
    await bucketSql(e.stub, "UPDATE executions SET dispatch_deadline_at = ? WHERE id = ?", Date.now() - 1, e.exe.id);
    await runAlarm(e.stub);
    const again = await e.row();
    expect(again).toMatchObject({ status: "dispatched", dispatch_count: 2 });
    expect(again.dispatch_deadline_at).toBeGreaterThan(Date.now());
    expect(sentFor(e.exe.id)).toBe(2);
    const after = await metrics();
    expect(diff(before, after, "redispatch_total")).toBe(1);
    expect(diff(before, after, "fired_total")).toBe(0);

    // the second copy is consumed and the execution runs once
    expect((await fire([e.message])).explicitAcks).toEqual(["m0"]);
    expect(await e.row()).toMatchObject({ status: "succeeded", attempt: 1 });
    expect(await received(e.path)).toHaveLength(1);
  });

  it(`marks an execution dead "undeliverable" after MAX_DISPATCHES unclaimed dispatches (failure row: message lost)`, async () => {
    const e = await dueExecution();
    await runAlarm(e.stub);
    const before = await metrics();
    for (let i = 0; i < 2 * MAX_DISPATCHES && (await e.row()).status === "dispatched"; i++) {
      await bucketSql(e.stub, "UPDATE executions SET dispatch_deadline_at = ? WHERE id = ?", Date.now() - 1, e.exe.id);
      await runAlarm(e.stub);
    }
    const row = await e.row();
    expect(row).toMatchObject({ status: "dead", dead_reason: "undeliverable", dispatch_count: MAX_DISPATCHES, attempt: 0 });
    expect(row.last_error).toBe(`not claimed after ${MAX_DISPATCHES} dispatches`);
    expect(sentFor(e.exe.id)).toBe(MAX_DISPATCHES);
    const after = await metrics();
    expect(diff(before, after, "redispatch_total")).toBe(MAX_DISPATCHES - 1);
    expect((after.dead_total_by_reason.undeliverable ?? 0) - (before.dead_total_by_reason.undeliverable ?? 0)).toBe(1);

    // a copy that turns up late is acked and dropped (invariant 7)
    expect((await fire([e.message])).explicitAcks).toEqual(["m0"]);
    expect((await e.row()).status).toBe("dead");
    expect(await received(e.path)).toHaveLength(0);
  });
});
