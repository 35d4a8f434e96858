/**
 * The alarm's dispatch: failure rows "queue send fails inside the alarm" (the execution stays
 * scheduled, dispatch_errors_total, a later alarm sends it) and "message lost or never consumed"
 * (re-dispatch, redispatch_total).
 *
 * The rule for a lost message (docs/data-path.md "Re-dispatch"): a dispatch is sent again only
 * when a dispatch of the same bucket sent DISPATCH_TIMEOUT_MS or more after it was claimed while it
 * is still unclaimed (it was overtaken by that much), or when 10 minutes passed. A queue that is
 * merely slow overtakes nothing and gets no copies, nor does one that reorders messages sent within
 * DISPATCH_TIMEOUT_MS of each other (production's queues do not keep order: issue 35 item 11); a
 * consumer down for an hour kills nothing (there is no "undeliverable" death any more).
 *
 * The buckets' queue bindings are the very objects the test sees as env.FIRE_QUEUE_<n> (the
 * Durable Object runs in the test isolate), so a spy on each sendBatch captures every send, or
 * fails the sends a test chooses. Nothing reaches the real queue, so nothing is consumed in the background:
 * a test "loses" a message by not feeding it to fire().
 * Time: one file-wide virtual clock, HEAD_START_MS ahead of the real one, moved only by tests;
 * every alarm a bucket arms lies ahead of the real clock, so only the alarms tests run happen.
 * Storage is shared by the file: every test uses its own jobs and leaves nothing in flight; the
 * long travels (10 minutes, an hour) come last.
 */
import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterAll, beforeAll, describe, expect, it, onTestFinished, vi } from "vitest";
import type { FireMessage } from "../../src/bucket/protocol";
import { configOf } from "../../src/config";
import {
  alarmOf,
  api,
  counters,
  d1Of,
  type Execution,
  fileClock,
  fire,
  fireQueues,
  jobRow,
  newExecution,
  received,
  receiverUrl,
  runAlarm,
  runScan,
  sentFor,
  uniquePath,
} from "./helpers";

const HEAD_START_MS = 10 * 60_000;
const { DISPATCH_TIMEOUT_MS, ALARM_QUANTUM_MS } = configOf(env);
/** the bucket holds its sends back this long after a failed send (bucket.ts DISPATCH_RETRY_MS) */
const DISPATCH_RETRY_MS = 1_000;
/** a dispatch unclaimed this long is sent again even if nothing overtook it (docs/data-path.md) */
const MAX_DISPATCH_WAIT_MS = 10 * 60_000;

const clock = fileClock(HEAD_START_MS);

const sent: FireMessage[] = [];
/** Sends of a batch holding one of these execution ids fail, as a queue outage would. */
const failSendsFor = new Set<string>();
beforeAll(() => {
  for (const queue of fireQueues()) {
    vi.spyOn(queue, "sendBatch").mockImplementation(async (messages) => {
      // each group as the single-execution messages of its executions (helpers.captureFiresForFile)
      const batch = [...messages].flatMap((m) =>
        m.body.executions.map(
          (e): FireMessage => ({ v: 1, executionId: e.executionId, bucket: m.body.bucket, tenant: e.tenant, dueAt: e.dueAt }),
        ),
      );
      if (batch.some((m) => failSendsFor.has(m.executionId))) throw new Error("queue unavailable");
      sent.push(...batch);
      return { metadata: { metrics: { backlogCount: 0, backlogBytes: 0 } } };
    });
  }
});
afterAll(() => vi.restoreAllMocks());

const sentOf = (executionId: string): FireMessage[] => sentFor(sent, executionId);
const lastSent = (executionId: string): FireMessage => {
  const messages = sentOf(executionId);
  if (messages.length === 0) throw new Error(`nothing was sent for ${executionId}`);
  return messages[messages.length - 1]!;
};

type Exe = Execution & { path: string };

/** A one-off job due now (or after `delay`), delivered to its own receiver path. */
async function oneOff(delay?: string): Promise<Exe> {
  const path = uniquePath();
  const e = await newExecution({ target: { url: `${receiverUrl()}${path}` }, ...(delay ? { delay } : {}) });
  // a test that fails midway must not leave a dispatch in flight for the next ones to see re-sent
  onTestFinished(async () => {
    const left = (await e.view())?.status;
    if (left === "scheduled" || left === "dispatched") await api(`/v1/jobs/${e.job.id}`, { method: "DELETE" });
  });
  return { ...e, path };
}

/** Creates jobs until one lands in `bucket` (the others are canceled before any alarm runs). */
async function inBucket(bucket: number, make: () => Promise<Exe>): Promise<Exe> {
  for (let i = 0; i < 64; i++) {
    const e = await make();
    if (e.exe.bucket === bucket) return e;
    expect((await api(`/v1/jobs/${e.job.id}`, { method: "DELETE" })).status).toBe(200);
  }
  throw new Error(`no job landed in bucket ${bucket}`);
}

/** The two executions in the order their (first) dispatches were sent. */
function byDispatchOrder(a: Exe, b: Exe): [Exe, Exe] {
  const first = (e: Exe) => sent.findIndex((m) => m.executionId === e.exe.id);
  expect(first(a)).toBeGreaterThanOrEqual(0);
  expect(first(b)).toBeGreaterThanOrEqual(0);
  return first(a) < first(b) ? [a, b] : [b, a];
}

const status = async (e: Exe) => (await e.view())?.status;

function delta(before: Record<string, number>, after: Record<string, number>, name: string): number {
  return (after[name] ?? 0) - (before[name] ?? 0);
}

describe("queue send failure", () => {
  it("leaves the execution scheduled and counts dispatch_errors_total when the send fails; a later alarm sends it (failure row: queue send fails)", async () => {
    const before = await counters();
    const e = await oneOff();
    failSendsFor.add(e.exe.id);
    try {
      await runAlarm(e.stub); // resolves: the alarm catches its own failures and re-arms
    } finally {
      failSendsFor.delete(e.exe.id);
    }
    expect(await status(e)).toBe("scheduled");
    expect(sentOf(e.exe.id)).toHaveLength(0);
    const failed = await counters();
    expect(delta(before, failed, "dispatch_errors_total")).toBe(1);
    expect(delta(before, failed, "fired_total")).toBe(0);
    const armed = await alarmOf(e.stub);
    expect(armed).not.toBeNull();
    expect(armed!).toBeLessThanOrEqual(clock.at + DISPATCH_RETRY_MS + ALARM_QUANTUM_MS);

    // the queue is back; the bucket holds its sends back a moment, then its own alarm sends
    clock.advance(DISPATCH_RETRY_MS / 2);
    await runAlarm(e.stub);
    expect(sentOf(e.exe.id)).toHaveLength(0);
    const next = (await alarmOf(e.stub))!;
    clock.travelTo(Math.max(clock.at, next));
    expect(await runDurableObjectAlarm(e.stub)).toBe(true);
    expect(await status(e)).toBe("dispatched");
    expect(sentOf(e.exe.id)).toHaveLength(1);
    expect(delta(failed, await counters(), "fired_total")).toBe(1);

    expect((await fire([lastSent(e.exe.id)])).explicitAcks).toEqual(["m0"]);
    expect(await status(e)).toBe("succeeded");
    expect(await received(e.path)).toHaveLength(1);
  });

  it("keeps a re-send whose send fails dispatched; it is sent when overtaken again (failure row: queue send fails)", async () => {
    const older = await oneOff();
    const t0 = clock.at;
    await runAlarm(older.stub);
    // a dispatch sent DISPATCH_TIMEOUT_MS later is claimed first: the older one was lost
    clock.travelTo(t0 + DISPATCH_TIMEOUT_MS);
    const newer = await inBucket(older.exe.bucket, () => oneOff());
    await runAlarm(newer.stub);
    expect(sentOf(older.exe.id)).toHaveLength(1);
    expect((await fire([lastSent(newer.exe.id)])).explicitAcks).toEqual(["m0"]);
    const before = await counters();

    failSendsFor.add(older.exe.id);
    try {
      await runAlarm(older.stub);
    } finally {
      failSendsFor.delete(older.exe.id);
    }
    expect(await status(older)).toBe("dispatched");
    expect(sentOf(older.exe.id)).toHaveLength(1);
    expect(delta(before, await counters(), "dispatch_errors_total")).toBe(1);

    // a dispatch sent DISPATCH_TIMEOUT_MS after the failed re-send is claimed: overtaken again
    const third = await inBucket(older.exe.bucket, () => oneOff("30s"));
    clock.travelTo((await third.view())!.dueAt);
    await runAlarm(third.stub);
    expect(sentOf(third.exe.id)).toHaveLength(1);
    expect(sentOf(older.exe.id)).toHaveLength(1); // not overtaken yet: its re-send is younger than every claim
    expect((await fire([lastSent(third.exe.id)])).explicitAcks).toEqual(["m0"]);
    await runAlarm(older.stub);
    expect(sentOf(older.exe.id)).toHaveLength(2);
    expect(lastSent(older.exe.id)).toEqual(sentOf(older.exe.id)[0]);

    expect((await fire([lastSent(older.exe.id)])).explicitAcks).toEqual(["m0"]);
    expect(await status(older)).toBe("succeeded");
    for (const e of [older, newer, third]) expect(await received(e.path)).toHaveLength(1);
  });
});

describe("lost messages", () => {
  it("re-sends a dispatch once one sent DISPATCH_TIMEOUT_MS after it was claimed (failure row: message lost)", async () => {
    const older = await oneOff();
    const t0 = clock.at;
    await runAlarm(older.stub);
    const original = lastSent(older.exe.id);
    const before = await counters();

    // the older message is lost; one sent just under DISPATCH_TIMEOUT_MS later is consumed: no copy
    clock.travelTo(t0 + DISPATCH_TIMEOUT_MS - 1);
    const near = await inBucket(older.exe.bucket, () => oneOff());
    await runAlarm(near.stub);
    expect((await fire([lastSent(near.exe.id)])).explicitAcks).toEqual(["m0"]);
    expect(await status(near)).toBe("succeeded");
    clock.travelTo(t0 + DISPATCH_TIMEOUT_MS + 1_000);
    await runAlarm(older.stub);
    expect(sentOf(older.exe.id)).toHaveLength(1);
    expect(delta(before, await counters(), "redispatch_total")).toBe(0);

    // one sent DISPATCH_TIMEOUT_MS or more after it is consumed: the older one is sent again
    const far = await inBucket(older.exe.bucket, () => oneOff());
    await runAlarm(far.stub);
    expect((await fire([lastSent(far.exe.id)])).explicitAcks).toEqual(["m0"]);
    await runAlarm(older.stub);
    expect(await status(older)).toBe("dispatched");
    expect(sentOf(older.exe.id)).toHaveLength(2);
    expect(lastSent(older.exe.id)).toEqual(original); // the same execution and due time
    const after = await counters();
    expect(delta(before, after, "redispatch_total")).toBe(1);

    // the copy is consumed and the execution runs once
    expect((await fire([lastSent(older.exe.id)])).explicitAcks).toEqual(["m0"]);
    expect(await received(older.path)).toHaveLength(1);
    await clock.flush(older.stub);
    expect(await jobRow(older.job.id)).toMatchObject({ status: "completed", run_status: "succeeded", attempts: 1, dead_reason: null });
  });

  it("gives a queue that reorders messages sent close together no copies (production's queues keep no order: issue 35 item 11)", async () => {
    const before = await counters();
    const first = await oneOff();
    const second = await inBucket(first.exe.bucket, () => oneOff());
    await runAlarm(first.stub);
    const [a, b] = byDispatchOrder(first, second);
    // b, sent after a in the same pass, is claimed first; a waits in the queue for 5 minutes
    expect((await fire([lastSent(b.exe.id)])).explicitAcks).toEqual(["m0"]);
    for (let i = 0; i < 10; i++) {
      clock.advance(30_000);
      await runAlarm(a.stub);
    }
    expect(sentOf(a.exe.id)).toHaveLength(1);
    expect((await fire([lastSent(a.exe.id)])).explicitAcks).toEqual(["m0"]);
    const after = await counters();
    expect(delta(before, after, "redispatch_total")).toBe(0);
    expect(delta(before, after, "duplicates_suppressed_total")).toBe(0);
    for (const e of [a, b]) expect(await received(e.path)).toHaveLength(1);
  });

  it("does not spin the bucket's alarm while a dispatch waits in a slow queue (failure row: message never consumed)", async () => {
    const e = await oneOff();
    await runAlarm(e.stub);
    expect(sentOf(e.exe.id)).toHaveLength(1);
    const before = await counters();

    // the platform runs the bucket's alarms as armed, for a virtual minute; nobody consumes
    const until = clock.at + 60_000;
    let runs = 0;
    for (; runs < 100; runs++) {
      const at = await alarmOf(e.stub);
      if (at === null || at > until) break;
      if (at > clock.at) clock.travelTo(at);
      await runDurableObjectAlarm(e.stub);
    }
    const after = await counters();
    console.log(
      JSON.stringify({
        slowQueueMinute: { alarmRuns: runs, alarmsSet: delta(before, after, "alarms_set_total"), virtualMs: clock.at - (until - 60_000) },
      }),
    );
    expect(sentOf(e.exe.id)).toHaveLength(1);
    expect(delta(before, after, "redispatch_total")).toBe(0);
    // nothing is due, nothing to flush, no claim to overtake it: a few alarms (counters, the
    // dispatch deadline), never one per alarm quantum
    expect(runs, "alarm runs in one virtual minute with one dispatch waiting in a slow queue").toBeLessThanOrEqual(12);

    expect((await fire([lastSent(e.exe.id)])).explicitAcks).toEqual(["m0"]);
    expect(await received(e.path)).toHaveLength(1);
  });

  it("gives a slow FIFO queue no copies: nothing is overtaken, redispatch_total stays 0 long after DISPATCH_TIMEOUT_MS", async () => {
    const before = await counters();
    const a = await oneOff();
    const b = await inBucket(a.exe.bucket, () => oneOff("20s"));
    const t0 = clock.at;
    await runAlarm(a.stub);
    clock.travelTo(t0 + 20_000);
    await runAlarm(a.stub);
    expect(byDispatchOrder(a, b)).toEqual([a, b]);

    // the queue is backlogged: alarms keep running, nobody consumes for 5 minutes
    const runAlarmsUntil = async (to: number) => {
      while (clock.at + 30_000 <= to) {
        clock.advance(30_000);
        await runAlarm(a.stub);
      }
    };
    await runAlarmsUntil(t0 + 5 * 60_000);
    expect([sentOf(a.exe.id).length, sentOf(b.exe.id).length]).toEqual([1, 1]);
    expect([await status(a), await status(b)]).toEqual(["dispatched", "dispatched"]);

    // the backlog drains in order: a first (b was sent after it, so nothing is overtaken) ...
    expect((await fire([lastSent(a.exe.id)])).explicitAcks).toEqual(["m0"]);
    await runAlarmsUntil(t0 + 9 * 60_000);
    expect(sentOf(b.exe.id)).toHaveLength(1);
    // ... then b
    expect((await fire([lastSent(b.exe.id)])).explicitAcks).toEqual(["m0"]);
    const after = await counters();
    expect(delta(before, after, "redispatch_total")).toBe(0);
    expect(delta(before, after, "duplicates_suppressed_total")).toBe(0);
    await clock.flush(a.stub);
    for (const e of [a, b]) {
      expect(await jobRow(e.job.id)).toMatchObject({ run_status: "succeeded", attempts: 1 });
      expect(await received(e.path)).toHaveLength(1);
    }
  });

  it("re-sends a dispatch nobody claimed for 10 minutes, overtaken or not; a late original is dropped (failure row: message never consumed)", async () => {
    const e = await oneOff();
    const t0 = clock.at;
    await runAlarm(e.stub);
    const original = lastSent(e.exe.id);
    const before = await counters();

    for (const at of [t0 + DISPATCH_TIMEOUT_MS, t0 + 5 * 60_000, t0 + MAX_DISPATCH_WAIT_MS - 1]) {
      clock.travelTo(at);
      await runAlarm(e.stub);
      expect(sentOf(e.exe.id)).toHaveLength(1);
    }
    expect(delta(before, await counters(), "redispatch_total")).toBe(0);

    clock.travelTo(t0 + MAX_DISPATCH_WAIT_MS);
    await runAlarm(e.stub);
    expect(sentOf(e.exe.id)).toHaveLength(2);
    expect(lastSent(e.exe.id)).toEqual(original);
    expect(await status(e)).toBe("dispatched");
    expect(delta(before, await counters(), "redispatch_total")).toBe(1);

    expect((await fire([lastSent(e.exe.id)])).explicitAcks).toEqual(["m0"]);
    expect(await status(e)).toBe("succeeded");
    // the original turns up late: acked and dropped (invariant 7)
    const late = await fire([original]);
    expect(late.explicitAcks).toEqual(["m0"]);
    expect(late.retryMessages).toEqual([]);
    expect(await received(e.path)).toHaveLength(1);
    expect(delta(before, await counters(), "duplicates_suppressed_total")).toBe(1);
  });

  // twelve scans of every shard: 2 s alone, past the default 5 s on a loaded machine
  it("kills nothing while the consumer is down for an hour; the execution is delivered once when the messages are finally consumed (failure row: message never consumed)", {
    timeout: 30_000,
  }, async () => {
    const e = await oneOff();
    await runAlarm(e.stub);
    const before = await counters();

    // an hour without a consumer: the bucket's alarms and the scanner keep running
    for (let i = 0; i < 12; i++) {
      clock.advance(5 * 60_000);
      await runScan();
      await runAlarm(e.stub);
      expect(await status(e)).toBe("dispatched");
    }
    const down = await counters();
    expect(delta(before, down, "dead_total")).toBe(0);
    const copies = sentOf(e.exe.id);
    // at most one copy per 10 minutes, each of the same execution and due time
    expect(copies.length).toBeGreaterThanOrEqual(2);
    expect(copies.length).toBeLessThanOrEqual(1 + 60 / 10);
    expect(new Set(copies.map((m) => JSON.stringify(m))).size).toBe(1);

    // the consumer is back and takes the whole backlog in one batch: one delivery, the rest dropped
    const result = await fire(copies);
    expect(result.explicitAcks.sort()).toEqual(copies.map((_, i) => `m${i}`).sort());
    expect(result.retryMessages).toEqual([]);
    expect(await received(e.path)).toHaveLength(1);
    await clock.flush(e.stub);
    expect(await jobRow(e.job.id)).toMatchObject({ status: "completed", run_status: "succeeded", attempts: 1, dead_reason: null });
    const dead = await d1Of(e.exe.id)
      .prepare("SELECT count(*) AS n FROM dead_letters WHERE execution_id = ?")
      .bind(e.exe.id)
      .first<{ n: number }>();
    expect(dead?.n).toBe(0);
    const after = await counters();
    expect(delta(before, after, "dead_total")).toBe(0);
    expect(delta(before, after, "duplicates_suppressed_total")).toBe(copies.length - 1);
  });
});
