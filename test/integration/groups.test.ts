/**
 * Delivery groups (README "Delivery groups"): a fire message carries what one alarm pass sends of
 * a bucket, claimed with one RPC and reported per bucket; everything per execution stays per
 * execution (lease, token, fencing, webhook-id, retries, dead letter). Time: one file-wide virtual
 * clock; the fire queue is captured as the groups the buckets send, and the tests feed them to the
 * consumer and the dead-letter consumer.
 */
import { evictDurableObject, runInDurableObject } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { Bucket } from "../../src/bucket/bucket";
import type { ClaimResult, CompletionReport, FireGroup, LeaseGrant } from "../../src/bucket/protocol";
import {
  api,
  bucketSql,
  bucketStub,
  CONFIG,
  captureFireGroupsForFile,
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
  uniquePath,
} from "./helpers";

const clock = fileClock(10 * 60_000);
const groups = captureFireGroupsForFile();

type Exe = Execution & { path: string };

/**
 * `n` one-off jobs due now that share a bucket, each delivered to its own receiver path (jobs
 * that land elsewhere are canceled before any alarm runs).
 */
async function sameBucket(n: number): Promise<{ bucket: number; exes: Exe[] }> {
  const byBucket = new Map<number, Exe[]>();
  for (let i = 0; i < 16 * n; i++) {
    const path = uniquePath();
    const e = { ...(await newExecution({ target: { url: `${receiverUrl()}${path}` } })), path };
    const list = byBucket.get(e.exe.bucket) ?? [];
    list.push(e);
    byBucket.set(e.exe.bucket, list);
    if (list.length === n) {
      for (const [b, others] of byBucket)
        if (b !== e.exe.bucket) for (const o of others) expect((await api(`/v1/jobs/${o.job.id}`, { method: "DELETE" })).status).toBe(200);
      return { bucket: e.exe.bucket, exes: list };
    }
  }
  throw new Error(`no ${n} jobs landed in one bucket`);
}

/** Runs the bucket's alarm and takes the groups it sent. */
async function alarmSends(e: Exe): Promise<FireGroup[]> {
  groups.splice(0);
  await runAlarm(e.stub);
  return groups.splice(0).filter((g) => g.bucket === e.exe.bucket);
}

const statusOf = async (e: Exe) => (await live(e.stub, e.exe.id))?.status;
const delta = (a: Record<string, number>, b: Record<string, number>, name: string) => (b[name] ?? 0) - (a[name] ?? 0);

describe("delivery groups", () => {
  it("sends what one alarm pass fires of a bucket as one message, claimed with one RPC; each execution keeps its own lease, token and webhook-id", async () => {
    const { exes } = await sameBucket(CONFIG.FIRE_GROUP_SIZE);
    const start = await counters();
    const sent = await alarmSends(exes[0]!);
    expect(sent).toHaveLength(1);
    // counted as billed: one queue message for the group, each execution fired
    const dispatched = await counters();
    expect(delta(start, dispatched, "fire_messages_total")).toBe(1);
    expect(delta(start, dispatched, "fired_total")).toBe(exes.length);
    expect(sent[0]!.v).toBe(2);
    expect(sent[0]!.executions.map((x) => x.executionId).sort()).toEqual(exes.map((e) => e.exe.id).sort());

    const claim = vi.spyOn(Bucket.prototype, "claim");
    const complete = vi.spyOn(Bucket.prototype, "complete");
    try {
      const result = await fire(sent);
      expect(result.explicitAcks).toEqual(["m0"]);
      expect(claim).toHaveBeenCalledTimes(1);
      expect(claim.mock.calls[0]![0]).toHaveLength(exes.length);
      const leases = (await claim.mock.results[0]!.value) as ClaimResult[];
      const granted = leases.filter((l): l is LeaseGrant => l.ok);
      expect(granted).toHaveLength(exes.length);
      expect(new Set(granted.map((l) => l.token)).size).toBe(exes.length);
      expect(new Set(granted.map((l) => l.seq)).size).toBe(exes.length);
      // every execution reported exactly once, in as few RPCs as the deliveries' timing allows
      const reported = complete.mock.calls.flatMap(([reports]) => reports.map((r) => r.executionId));
      expect(reported.sort()).toEqual(exes.map((e) => e.exe.id).sort());
      expect(complete.mock.calls.length).toBeLessThanOrEqual(exes.length);
    } finally {
      claim.mockRestore();
      complete.mockRestore();
    }
    for (const e of exes) {
      const requests = await received(e.path);
      expect(requests).toHaveLength(1);
      expect(requests[0]!.headers["webhook-id"]).toBe(e.exe.id);
      expect(await statusOf(e)).toBe("succeeded");
    }
    await clock.flush(exes[0]!.stub);
    for (const e of exes) expect((await jobRow(e.job.id))?.run_status).toBe("succeeded");
  });

  it("splits a pass into groups of FIRE_GROUP_SIZE", async () => {
    const { exes } = await sameBucket(CONFIG.FIRE_GROUP_SIZE + 2);
    const sent = await alarmSends(exes[0]!);
    expect(sent.map((g) => g.executions.length)).toEqual([CONFIG.FIRE_GROUP_SIZE, 2]);
    const result = await fire(sent);
    expect(result.explicitAcks.sort()).toEqual(["m0", "m1"]);
    for (const e of exes) expect(await received(e.path)).toHaveLength(1);
    await clock.flush(exes[0]!.stub);
  });

  it("one execution whose claim fails never harms the others of its group: they run once, its message is retried, and the dead-letter queue kills only it", async () => {
    const { exes } = await sameBucket(3);
    const [bad, ...healthy] = exes as [Exe, ...Exe[]];
    // its stored spec is unreadable: its claim throws, every time
    await bucketSql(bad.stub, "UPDATE executions SET spec = 'not json' WHERE id = ?", bad.exe.id);
    const sent = await alarmSends(bad);
    expect(sent).toHaveLength(1);

    const first = await fire(sent);
    expect(first.retryMessages.map((m) => m.msgId)).toEqual(["m0"]);
    for (const e of healthy) {
      expect(await received(e.path)).toHaveLength(1);
      expect(await statusOf(e)).toBe("succeeded");
    }
    expect(await received(bad.path)).toHaveLength(0);
    expect(await statusOf(bad)).toBe("dispatched");

    // the queue delivers the message again: the healthy ones are duplicates, never delivered twice
    const before = await counters();
    const second = await fire(sent, { attempts: 2 });
    expect(second.retryMessages.map((m) => m.msgId)).toEqual(["m0"]);
    expect(delta(before, await counters(), "duplicates_suppressed_total")).toBe(healthy.length);
    for (const e of healthy) expect(await received(e.path)).toHaveLength(1);

    // the queue gives up: the dead-letter consumer judges each execution by itself
    const dlq = await fire(sent, { queue: "fire-dlq" });
    expect(dlq.explicitAcks).toEqual(["m0"]);
    expect(await statusOf(bad)).toBe("dead");
    for (const e of healthy) expect(await statusOf(e)).toBe("succeeded");
    await clock.flush(bad.stub);
    expect(await jobRow(bad.job.id)).toMatchObject({ run_status: "dead", dead_reason: "poison" });
    for (const e of healthy) expect((await jobRow(e.job.id))?.run_status).toBe("succeeded");
  });

  it("a redelivered group is suppressed per execution: while running, once finished, and once its outcomes are in D1", async () => {
    const { exes } = await sameBucket(3);
    const sent = await alarmSends(exes[0]!);
    // one of the group is claimed first by another copy (a duplicate delivery racing the group)
    const lone = sent[0]!.executions[0]!;
    const start = await counters();
    expect((await fire([{ ...sent[0]!, executions: [lone] }])).explicitAcks).toEqual(["m0"]);
    const group = await fire(sent);
    expect(group.explicitAcks).toEqual(["m0"]);
    expect(delta(start, await counters(), "duplicates_suppressed_total")).toBe(1);
    for (const e of exes) expect(await received(e.path)).toHaveLength(1);

    const finished = await counters();
    expect((await fire(sent)).explicitAcks).toEqual(["m0"]);
    expect(delta(finished, await counters(), "duplicates_suppressed_total")).toBe(exes.length);
    await clock.flush(exes[0]!.stub);
    const flushed = await counters();
    expect((await fire(sent)).explicitAcks).toEqual(["m0"]);
    expect(delta(flushed, await counters(), "duplicates_suppressed_total")).toBe(exes.length);
    for (const e of exes) {
      expect(await received(e.path)).toHaveLength(1);
      expect((await jobRow(e.job.id))?.run_status).toBe("succeeded");
    }
  });

  it("a group split across a bucket restart loses nothing: what was reported stays done, what was not runs again with the same webhook-id, and the old reports are stale", async () => {
    const { exes } = await sameBucket(4);
    const sent = await alarmSends(exes[0]!);
    expect(sent).toHaveLength(1);
    const unreported = new Set(exes.slice(2).map((e) => e.exe.id));
    const lost: CompletionReport[] = [];
    const realComplete = Bucket.prototype.complete;
    const complete = vi.spyOn(Bucket.prototype, "complete").mockImplementation(async function (this: Bucket, reports) {
      lost.push(...reports.filter((r) => unreported.has(r.executionId)));
      return realComplete.call(
        this,
        reports.filter((r) => !unreported.has(r.executionId)),
      );
    });
    try {
      expect((await fire(sent)).explicitAcks).toEqual(["m0"]);
    } finally {
      complete.mockRestore();
    }
    expect(lost).toHaveLength(2);
    await clock.flush(exes[0]!.stub); // the two reported outcomes reach D1 and leave the bucket
    const stub = exes[0]!.stub;
    await runInDurableObject(stub, () => undefined);
    await evictDurableObject(stub);

    expect((await stub.complete(lost)).map((r) => r.ok)).toEqual([false, false]);
    for (const e of exes) expect(await statusOf(e)).toBe(unreported.has(e.exe.id) ? "scheduled" : undefined);
    const again = await alarmSends(exes[0]!);
    expect(again.flatMap((g) => g.executions.map((x) => x.executionId)).sort()).toEqual([...unreported].sort());
    expect((await fire(again)).explicitAcks).toEqual(["m0"]);
    await clock.flush(stub);
    for (const e of exes) {
      const requests = await received(e.path);
      expect(requests).toHaveLength(unreported.has(e.exe.id) ? 2 : 1);
      for (const r of requests) expect(r.headers["webhook-id"]).toBe(e.exe.id);
      expect((await jobRow(e.job.id))?.run_status).toBe("succeeded");
    }
  });

  it("takes the single-execution messages of earlier versions (v1) still queued at an upgrade", async () => {
    const { exes } = await sameBucket(1);
    const [group] = await alarmSends(exes[0]!);
    const x = group!.executions[0]!;
    const result = await fire([{ v: 1, executionId: x.executionId, bucket: group!.bucket, tenant: x.tenant, dueAt: x.dueAt }]);
    expect(result.explicitAcks).toEqual(["m0"]);
    expect(await received(exes[0]!.path)).toHaveLength(1);
    await clock.flush(exes[0]!.stub);
  });

  it("acks and counts a malformed group: empty, or one execution malformed", async () => {
    const malformed = async () =>
      (await bucketStub(0).metrics()).counters.filter((c) => c.name === "malformed_messages_total").reduce((sum, c) => sum + c.value, 0);
    const before = await malformed();
    const result = await fire([
      { v: 2, bucket: 0, executions: [] },
      { v: 2, bucket: 0, executions: [{ executionId: "nope", tenant: "acme", dueAt: 1 }] },
    ]);
    expect(result.explicitAcks.sort()).toEqual(["m0", "m1"]);
    expect(result.retryMessages).toEqual([]);
    expect((await malformed()) - before).toBe(2);
  });
});
