/**
 * Recurring jobs and the two-layer scan inside workerd (issue 4). Proves:
 * - firing an occurrence creates the next one in the same alarm step, unique on (job, due time):
 *   a repeated alarm, a repeated firing step or a repeated hand-off never makes two;
 * - each occurrence is its own execution with its own id (= webhook-id, invariant 5);
 * - maxOccurrences, pause / resume (and the reopen of a canceled occurrence), PATCH of the
 *   schedule, of the target and of a one-off job's runAt; validation at the door (400 naming the field);
 * - catch-up after downtime: one (default), none, all (bounded);
 * - the two layers: a far-future one-off waits only in D1 until the scan window reaches it; a
 *   cron occurrence beyond the lookahead goes bucket outbox -> D1 (pending) -> scan -> bucket;
 *   the scan, run twice or twice at once, schedules nothing twice.
 *
 * Time: Date.now() is frozen for this whole file at a virtual time HEAD_START_MS ahead of the real
 * clock and moves only when a test travels (travelTo / advance). The Worker and its Durable
 * Objects run in this isolate and read the same clock, so "the occurrence is due" or "the stack
 * was down for an hour" is a move of the clock, never a sleep, and no row is edited to fake it.
 * Every alarm a bucket arms lies at a virtual time, so at least HEAD_START_MS ahead of the real
 * clock: none fires on its own while this file runs, only the alarms the tests run themselves.
 * captureFires() keeps fire messages off the real queue; tests feed them through worker.queue.
 * helpers.withClockAhead / flushMirror must not be used here (they spy on Date.now themselves);
 * flush() below is the same loop on this file's clock.
 * Storage is shared by the tests of this file: each test uses its own jobs and cancels them when
 * done; the clock only moves forward, so the long travels (a day, 30 days) come last.
 */
import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";
import { describe, expect, it, onTestFinished } from "vitest";
import { occurrenceId } from "../../src/core/id";
import type { JobSpec } from "../../src/core/job";
import type { FireMessage } from "../../src/env";
import {
  alarmOf,
  api,
  bucketSql,
  bucketStub,
  captureFires,
  counters,
  createJob,
  fileClock,
  fire,
  type JobJson,
  received,
  receiverUrl,
  runScan,
  uniquePath,
} from "./helpers";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const HEAD_START_MS = 10 * 60_000;
const MINUTE = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;
const LOOKAHEAD_MS = Number(env.LOOKAHEAD_MS ?? 180_000);
const SCAN_WINDOW_MS = Number(env.SCAN_WINDOW_MS ?? 60_000);
const MIRROR_DELAY_MS = Number(env.MIRROR_DELAY_MS ?? 1_000);
const QUANTUM_MS = Number(env.ALARM_QUANTUM_MS ?? 50);
const quantized = (at: number) => Math.ceil(at / QUANTUM_MS) * QUANTUM_MS;

// ---------------------------------------------------------------------------------------------
// the file's clock

const clock = fileClock(HEAD_START_MS);
const { travelTo, advance, flush } = clock;

/** The first whole minute at or after `at` (a "* * * * *" schedule's first occurrence). */
const minuteAtOrAfter = (at: number) => Math.ceil(at / MINUTE) * MINUTE;
/** The first whole minute strictly after `at`. */
const minuteAfter = (at: number) => (Math.floor(at / MINUTE) + 1) * MINUTE;

// ---------------------------------------------------------------------------------------------
// helpers of this file

type Stub = ReturnType<typeof bucketStub>;

interface Created {
  job: JobJson;
  bucket: number;
  stub: Stub;
  path: string;
  /** the first execution's due time */
  firstAt: number;
}

/** Creates a job (cron or one-off) at the receiver and cancels it when the test ends. */
async function create(fields: Record<string, unknown>, kind = "ok"): Promise<Created> {
  const path = uniquePath(kind);
  const job = await createJob({ target: { url: `${receiverUrl()}${path}` }, ...fields });
  onTestFinished(async () => {
    await api(`/v1/jobs/${job.id}`, { method: "DELETE" }); // 409 once completed: nothing left to stop
  });
  const row = await env.DB.prepare("SELECT bucket, due_at FROM executions WHERE job_id = ? ORDER BY due_at LIMIT 1")
    .bind(job.id)
    .first<{ bucket: number; due_at: number }>();
  if (!row) throw new Error("no D1 execution for the new job");
  return { job, bucket: row.bucket, stub: bucketStub(row.bucket), path, firstAt: row.due_at };
}

interface Occurrence {
  id: string;
  status: string;
  due_at: number;
  occurrence_at: number;
  occurrence: number;
  spawned: number;
  last: number;
  last_error: string | null;
}

/** The job's executions held by its bucket, earliest occurrence first. */
function inBucket(c: Created): Promise<Occurrence[]> {
  return bucketSql<Occurrence>(
    c.stub,
    "SELECT id, status, due_at, occurrence_at, occurrence, spawned, last, last_error FROM executions WHERE job_id = ? ORDER BY occurrence_at",
    c.job.id,
  );
}

interface D1Occurrence {
  id: string;
  status: string;
  due_at: number;
  time_bucket: number;
  occurrence: number;
  attempts: number;
}

/** The job's executions in D1, earliest due first. */
async function inD1(jobId: string): Promise<D1Occurrence[]> {
  const { results } = await env.DB.prepare(
    "SELECT id, status, due_at, time_bucket, occurrence, attempts FROM executions WHERE job_id = ? ORDER BY due_at",
  )
    .bind(jobId)
    .all<D1Occurrence>();
  return results;
}

async function jobStatusInD1(jobId: string): Promise<string | undefined> {
  return (await env.DB.prepare("SELECT status FROM jobs WHERE id = ?").bind(jobId).first<{ status: string }>())?.status;
}

/** Fire messages captured so far for the job's executions (ids: those its bucket holds). */
async function sentFor(fires: { messages: FireMessage[] }, c: Created): Promise<FireMessage[]> {
  const ids = new Set((await inBucket(c)).map((r) => r.id));
  return fires.messages.filter((m) => ids.has(m.executionId));
}

/** Runs the worker's queue handler on messages and expects each to be acked. */
async function deliver(messages: FireMessage[]): Promise<void> {
  const result = await fire(messages);
  expect(result.explicitAcks).toEqual(messages.map((_, i) => `m${i}`));
  expect(result.retryMessages).toEqual([]);
}

async function changeJob(jobId: string, action: "pause" | "resume"): Promise<Response> {
  return api(`/v1/jobs/${jobId}/${action}`, { method: "POST" });
}

async function patch(jobId: string, body: unknown): Promise<Response> {
  return api(`/v1/jobs/${jobId}`, { method: "PATCH", body });
}

/** Moves to an occurrence's due time and fires it by the alarm; returns its fire message. */
async function fireOccurrence(fires: { messages: FireMessage[] }, c: Created, at: number): Promise<FireMessage> {
  const id = occurrenceId(c.job.id, at);
  travelTo(Math.max(at, clock.at));
  expect(await runDurableObjectAlarm(c.stub)).toBe(true);
  const sent = fires.messages.filter((m) => m.executionId === id);
  expect(sent).toHaveLength(1);
  return sent[0]!;
}

// ---------------------------------------------------------------------------------------------

describe("a cron job fires occurrence by occurrence", () => {
  it("fires each occurrence by the alarm as its own execution (own id = webhook-id) and creates the next one in the same step (invariant 5)", async () => {
    const fires = captureFires();
    const c = await create({ cron: "* * * * *" });
    const first = minuteAtOrAfter(Date.now());
    expect(Date.parse(c.job.nextRunAt!)).toBe(first);
    const id1 = occurrenceId(c.job.id, first);
    // the first occurrence is within the lookahead: D1 says scheduled, the bucket holds it
    expect(await inD1(c.job.id)).toEqual([
      { id: id1, status: "scheduled", due_at: first, time_bucket: Math.floor(first / SCAN_WINDOW_MS), occurrence: 1, attempts: 0 },
    ]);
    expect(await inBucket(c)).toEqual([
      { id: id1, status: "scheduled", due_at: first, occurrence_at: first, occurrence: 1, spawned: 0, last: 0, last_error: null },
    ]);
    expect(await alarmOf(c.stub)).toBeLessThanOrEqual(quantized(first));

    // occurrence 1 falls due: the alarm dispatches it and creates occurrence 2
    const second = first + MINUTE;
    const id2 = occurrenceId(c.job.id, second);
    const m1 = await fireOccurrence(fires, c, first);
    expect(m1).toEqual({ v: 1, executionId: id1, bucket: c.bucket, tenant: "acme", dueAt: first });
    expect(await inBucket(c)).toEqual([
      expect.objectContaining({ id: id1, status: "dispatched", occurrence: 1, spawned: 1, last: 0 }),
      { id: id2, status: "scheduled", due_at: second, occurrence_at: second, occurrence: 2, spawned: 0, last: 0, last_error: null },
    ]);
    await deliver([m1]);

    // occurrence 2 falls due: dispatched, occurrence 3 created
    const third = second + MINUTE;
    const id3 = occurrenceId(c.job.id, third);
    const m2 = await fireOccurrence(fires, c, second);
    await deliver([m2]);
    expect(await inBucket(c)).toEqual([
      expect.objectContaining({ id: id1, status: "succeeded", occurrence: 1 }),
      expect.objectContaining({ id: id2, status: "succeeded", occurrence: 2, spawned: 1 }),
      expect.objectContaining({ id: id3, status: "scheduled", due_at: third, occurrence: 3, spawned: 0 }),
    ]);

    // each delivery is its own execution: its own webhook-id and idempotency key, signed, same job
    const got = await received(c.path);
    expect(got.map((r) => r.headers["webhook-id"])).toEqual([id1, id2]);
    for (const r of got) {
      expect(r.headers["idempotency-key"]).toBe(r.headers["webhook-id"]);
      expect(r.headers["x-scheduler-job-id"]).toBe(c.job.id);
      expect(r.headers["x-scheduler-attempt"]).toBe("1");
      new Webhook(SECRET).verify(r.body, r.headers);
    }

    // D1 after the mirror: one row per occurrence, the next one included
    await flush(c.stub);
    expect(await inD1(c.job.id)).toEqual([
      expect.objectContaining({ id: id1, status: "succeeded", due_at: first, occurrence: 1, attempts: 1 }),
      expect.objectContaining({ id: id2, status: "succeeded", due_at: second, occurrence: 2, attempts: 1 }),
      { id: id3, status: "scheduled", due_at: third, time_bucket: Math.floor(third / SCAN_WINDOW_MS), occurrence: 3, attempts: 0 },
    ]);
    expect(await jobStatusInD1(c.job.id)).toBe("active");
    const listed = (await (await api(`/v1/jobs/${c.job.id}/executions`)).json()) as { executions: { id: string; status: string }[] };
    expect(listed.executions.map((e) => [e.id, e.status])).toEqual([
      [id3, "scheduled"],
      [id2, "succeeded"],
      [id1, "succeeded"],
    ]);
  });

  it("never makes two of one occurrence: a repeated alarm, a repeated firing step, a repeated hand-off (unique on job + due time)", async () => {
    const fires = captureFires();
    const c = await create({ cron: "* * * * *" });
    const first = c.firstAt;
    const second = first + MINUTE;
    const [id1, id2] = [occurrenceId(c.job.id, first), occurrenceId(c.job.id, second)];
    await fireOccurrence(fires, c, first);

    // the alarm runs again at the same time: nothing new
    await runDurableObjectAlarm(c.stub);
    const afterFirst = await inBucket(c);
    expect(afterFirst.map((r) => [r.id, r.status, r.occurrence])).toEqual([
      [id1, "dispatched", 1],
      [id2, "scheduled", 2],
    ]);
    expect(fires.messages.filter((m) => m.executionId === id1)).toHaveLength(1);

    // the firing step runs a second time for the same occurrence (as after a lost write):
    // the next occurrence collides on (job, due time) and stays one row
    await bucketSql(c.stub, "UPDATE executions SET status = 'scheduled', spawned = 0, dispatch_deadline_at = NULL WHERE id = ?", id1);
    expect(await runDurableObjectAlarm(c.stub)).toBe(true);
    expect((await inBucket(c)).map((r) => [r.id, r.status, r.occurrence])).toEqual([
      [id1, "dispatched", 1],
      [id2, "scheduled", 2],
    ]);

    // a repeated hand-off of either occurrence (scanner, create, resume) is a no-op
    const [{ spec }] = (await bucketSql<{ spec: string }>(c.stub, "SELECT spec FROM jobs WHERE id = ?", c.job.id)) as [{ spec: string }];
    const handOff = (dueAt: number, occurrence: number, reopen = false) => ({
      executionId: occurrenceId(c.job.id, dueAt), jobId: c.job.id, tenant: "acme", dueAt, occurrence, reopen,
      job: { specJson: spec, recurring: true, status: "active" as const },
    });
    expect(await c.stub.schedule(c.bucket, [handOff(first, 1), handOff(second, 2)])).toEqual({ scheduled: 0 });
    expect(await c.stub.schedule(c.bucket, [handOff(first, 1, true), handOff(second, 2, true)])).toEqual({ scheduled: 0 });
    expect((await inBucket(c)).map((r) => [r.id, r.status, r.occurrence])).toEqual([
      [id1, "dispatched", 1],
      [id2, "scheduled", 2],
    ]);

    // the two fire messages of occurrence 1 are one delivery (invariant 7)
    const twice = fires.messages.filter((m) => m.executionId === id1);
    expect(twice).toHaveLength(2);
    await deliver(twice);
    expect(await received(c.path)).toHaveLength(1);

    // D1: one row per due time, and the scan finds nothing to hand over again
    await flush(c.stub);
    await runScan();
    expect((await inD1(c.job.id)).map((r) => [r.id, r.due_at, r.status])).toEqual([
      [id1, first, "succeeded"],
      [id2, second, "scheduled"],
    ]);
    expect(await inBucket(c)).toHaveLength(2);
  });

  it("stops at maxOccurrences: no next after the last one, and the job completes once that execution is terminal", async () => {
    const fires = captureFires();
    const c = await create({ cron: "* * * * *", maxOccurrences: 2 });
    const [first, second] = [c.firstAt, c.firstAt + MINUTE];
    await deliver([await fireOccurrence(fires, c, first)]);

    const m2 = await fireOccurrence(fires, c, second);
    // occurrence 2 is the last: nothing after it, in the bucket or on its way to D1
    expect((await inBucket(c)).map((r) => [r.occurrence, r.status, r.spawned, r.last])).toEqual([
      [1, "succeeded", 1, 0],
      [2, "dispatched", 1, 1],
    ]);
    expect(await bucketSql(c.stub, "SELECT id FROM outbox_pending WHERE job_id = ?", c.job.id)).toEqual([]);
    await flush(c.stub);
    expect(await jobStatusInD1(c.job.id)).toBe("active"); // the last execution is not terminal yet

    await deliver([m2]);
    await flush(c.stub);
    expect(await jobStatusInD1(c.job.id)).toBe("completed");
    const shown = (await (await api(`/v1/jobs/${c.job.id}`)).json()) as { status: string; nextRunAt: string | null; nextRuns: string[] };
    expect(shown).toMatchObject({ status: "completed", nextRunAt: null, nextRuns: [] });

    // later alarms fire nothing more
    travelTo(second + 3 * MINUTE);
    await runDurableObjectAlarm(c.stub);
    expect(await inBucket(c)).toHaveLength(2);
    expect(await sentFor(fires, c)).toHaveLength(2);
    expect(await received(c.path)).toHaveLength(2);
  });

  it("lists in nextRuns only the occurrences maxOccurrences still allows after some fired", async () => {
    const fires = captureFires();
    const c = await create({ cron: "* * * * *", maxOccurrences: 2 });
    const before = (await (await api(`/v1/jobs/${c.job.id}`)).json()) as { nextRuns: string[] };
    expect(before.nextRuns.map(Date.parse)).toEqual([c.firstAt, c.firstAt + MINUTE]);

    await deliver([await fireOccurrence(fires, c, c.firstAt)]);
    await flush(c.stub);
    // one of two fired: only the second is still to come
    const after = (await (await api(`/v1/jobs/${c.job.id}`)).json()) as { status: string; nextRuns: string[] };
    expect(after.status).toBe("active");
    expect(after.nextRuns.map(Date.parse)).toEqual([c.firstAt + MINUTE]);
  });
});

describe("pause, resume, PATCH", () => {
  it("pause stops new executions: 200 paused, the scheduled occurrence canceled in the bucket, the alarm fires nothing for the job", async () => {
    const fires = captureFires();
    const c = await create({ cron: "* * * * *" });
    await deliver([await fireOccurrence(fires, c, c.firstAt)]);
    const id2 = occurrenceId(c.job.id, c.firstAt + MINUTE);

    const res = await changeJob(c.job.id, "pause");
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ id: c.job.id, status: "paused", nextRunAt: null });
    expect((await inBucket(c)).map((r) => [r.id, r.status, r.last_error])).toEqual([
      [occurrenceId(c.job.id, c.firstAt), "succeeded", null],
      [id2, "canceled", "paused"],
    ]);
    expect(await bucketSql(c.stub, "SELECT status FROM jobs WHERE id = ?", c.job.id)).toEqual([{ status: "paused" }]);
    expect(await jobStatusInD1(c.job.id)).toBe("paused");

    // past the canceled occurrence and the one after it: nothing fires, nothing new is made
    travelTo(c.firstAt + 3 * MINUTE);
    await runDurableObjectAlarm(c.stub);
    expect(await inBucket(c)).toHaveLength(2);
    expect(await sentFor(fires, c)).toHaveLength(1);
    expect(await received(c.path)).toHaveLength(1);
    await flush(c.stub);
    expect((await inD1(c.job.id)).map((r) => r.status)).toEqual(["succeeded", "canceled"]);

    // pausing again is a no-op; a one-off job cannot be paused (cancel it instead)
    const again = await changeJob(c.job.id, "pause");
    expect(again.status).toBe(200);
    expect(((await again.json()) as { status: string }).status).toBe("paused");
    const oneOff = await create({ delay: "1m" });
    const refused = await changeJob(oneOff.job.id, "pause");
    expect(refused.status).toBe(409);
    expect(await refused.json()).toMatchObject({ error: { code: "not_recurring", field: "id" } });
  });

  it("resume continues from the next future occurrence: status active, a new scheduled execution due after now, the missed ones never fire", async () => {
    const fires = captureFires();
    const c = await create({ cron: "* * * * *" });
    await deliver([await fireOccurrence(fires, c, c.firstAt)]);
    expect((await changeJob(c.job.id, "pause")).status).toBe(200);
    await flush(c.stub); // the pause is long: D1 has long learned what the bucket canceled

    // paused across two occurrences
    travelTo(c.firstAt + 2 * MINUTE + 30_000);
    const now = Date.now();
    const res = await changeJob(c.job.id, "resume");
    expect(res.status).toBe(200);
    const next = minuteAfter(now);
    expect(await res.json()).toMatchObject({ status: "active", nextRunAt: new Date(next).toISOString() });
    const idNext = occurrenceId(c.job.id, next);
    expect((await inBucket(c)).map((r) => [r.id, r.status, r.due_at, r.occurrence])).toEqual([
      [occurrenceId(c.job.id, c.firstAt), "succeeded", c.firstAt, 1],
      [occurrenceId(c.job.id, c.firstAt + MINUTE), "canceled", c.firstAt + MINUTE, 2],
      [idNext, "scheduled", next, 2], // the second occurrence to fire
    ]);
    expect(next).toBeGreaterThan(now);
    expect((await inD1(c.job.id)).find((r) => r.id === idNext)).toMatchObject({ status: "scheduled", due_at: next });
    expect(await jobStatusInD1(c.job.id)).toBe("active");

    await deliver([await fireOccurrence(fires, c, next)]);
    expect((await received(c.path)).map((r) => r.headers["webhook-id"])).toEqual([occurrenceId(c.job.id, c.firstAt), idNext]);

    // resuming an active job is a no-op
    const again = await changeJob(c.job.id, "resume");
    expect(again.status).toBe(200);
    expect(((await again.json()) as { status: string }).status).toBe("active");
  });

  it("pause then resume before the next due time reopens that same occurrence: same execution id, one row", async () => {
    const fires = captureFires();
    const c = await create({ cron: "* * * * *" });
    await deliver([await fireOccurrence(fires, c, c.firstAt)]);
    const second = c.firstAt + MINUTE;
    const id2 = occurrenceId(c.job.id, second);

    expect((await changeJob(c.job.id, "pause")).status).toBe(200);
    expect((await inBucket(c)).find((r) => r.id === id2)?.status).toBe("canceled");
    await flush(c.stub);
    expect((await changeJob(c.job.id, "resume")).status).toBe(200);

    expect((await inBucket(c)).map((r) => [r.id, r.status, r.due_at])).toEqual([
      [occurrenceId(c.job.id, c.firstAt), "succeeded", c.firstAt],
      [id2, "scheduled", second],
    ]);
    await flush(c.stub);
    expect((await inD1(c.job.id)).map((r) => [r.id, r.status])).toEqual([
      [occurrenceId(c.job.id, c.firstAt), "succeeded"],
      [id2, "scheduled"],
    ]);
    await deliver([await fireOccurrence(fires, c, second)]);
    expect((await received(c.path)).map((r) => r.headers["webhook-id"])).toEqual([occurrenceId(c.job.id, c.firstAt), id2]);
  });

  it("pause and an immediate resume keep the occurrence count: maxOccurrences 3 still fires 3 times", async () => {
    const fires = captureFires();
    const c = await create({ cron: "* * * * *", maxOccurrences: 3 });
    await deliver([await fireOccurrence(fires, c, c.firstAt)]);
    await flush(c.stub); // D1 knows occurrence 2 as scheduled
    const second = c.firstAt + MINUTE;

    // resumed within the mirror delay of the pause: D1 has not learned the cancel yet
    expect((await changeJob(c.job.id, "pause")).status).toBe(200);
    expect((await changeJob(c.job.id, "resume")).status).toBe(200);
    expect((await inBucket(c)).find((r) => r.id === occurrenceId(c.job.id, second))?.status).toBe("scheduled");

    await deliver([await fireOccurrence(fires, c, second)]);
    // two of three fired: the third must still come, as occurrence 3
    expect((await inBucket(c)).map((r) => [r.occurrence, r.status, r.last])).toEqual([
      [1, "succeeded", 0],
      [2, "succeeded", 0],
      [3, "scheduled", 0],
    ]);
  });

  it("PATCH of the schedule cancels the scheduled occurrence and schedules the next occurrence of the new schedule", async () => {
    const fires = captureFires();
    const c = await create({ cron: "* * * * *" });
    const id1 = occurrenceId(c.job.id, c.firstAt);
    const now = Date.now();

    const res = await patch(c.job.id, { cron: "30 * * * * *" }); // every minute at second 30
    expect(res.status).toBe(200);
    const patched = (await res.json()) as { status: string; nextRunAt: string; schedule: { cron: string } };
    const next = minuteAtOrAfter(now - 30_000) + 30_000; // the first second-30 at or after now
    expect(patched).toMatchObject({ status: "active", schedule: { cron: "30 * * * * *" }, nextRunAt: new Date(next).toISOString() });
    const idNext = occurrenceId(c.job.id, next);
    const expected: [string, string, number, string | null][] = [
      [id1, "canceled", c.firstAt, "rescheduled"],
      [idNext, "scheduled", next, null],
    ];
    expect((await inBucket(c)).map((r) => [r.id, r.status, r.due_at, r.last_error])).toEqual(expected.sort((a, b) => a[2] - b[2]));

    // the new schedule goes on: its occurrence fires and the one after it is 60 s later, at :30
    const m = await fireOccurrence(fires, c, next);
    await deliver([m]);
    travelTo(Math.max(c.firstAt, clock.at));
    await runDurableObjectAlarm(c.stub);
    expect(fires.messages.filter((x) => x.executionId === id1)).toEqual([]);
    expect((await inBucket(c)).filter((r) => r.status === "scheduled").map((r) => r.due_at)).toEqual([next + MINUTE]);
    expect((await received(c.path)).map((r) => r.headers["webhook-id"])).toEqual([idNext]);
    await flush(c.stub);
    expect((await inD1(c.job.id)).find((r) => r.id === id1)?.status).toBe("canceled");
  });

  it("PATCH of the schedule before any occurrence fired keeps the whole maxOccurrences budget", async () => {
    const fires = captureFires();
    const c = await create({ cron: "* * * * *", maxOccurrences: 2 });
    expect((await patch(c.job.id, { cron: "30 * * * * *" })).status).toBe(200);

    // nothing has fired yet: the first occurrence of the new schedule is occurrence 1 of 2,
    // so firing it must create occurrence 2
    const [scheduled] = (await inBucket(c)).filter((r) => r.status === "scheduled");
    await deliver([await fireOccurrence(fires, c, scheduled!.due_at)]);
    expect((await inBucket(c)).filter((r) => r.status !== "canceled").map((r) => [r.due_at, r.occurrence, r.status, r.last])).toEqual([
      [scheduled!.due_at, 1, "succeeded", 0],
      [scheduled!.due_at + MINUTE, 2, "scheduled", 0],
    ]);
  });

  it("PATCH of only the target keeps the scheduled occurrence; its delivery goes to the new URL", async () => {
    const fires = captureFires();
    const c = await create({ cron: "* * * * *" });
    const id1 = occurrenceId(c.job.id, c.firstAt);
    const newPath = uniquePath();

    const res = await patch(c.job.id, { target: { url: `${receiverUrl()}${newPath}` } });
    expect(res.status).toBe(200);
    expect(((await res.json()) as JobJson).target.url).toBe(`${receiverUrl()}${newPath}`);
    expect((await inBucket(c)).map((r) => [r.id, r.status, r.due_at])).toEqual([[id1, "scheduled", c.firstAt]]);

    await deliver([await fireOccurrence(fires, c, c.firstAt)]);
    const got = await received(newPath);
    expect(got.map((r) => r.headers["webhook-id"])).toEqual([id1]);
    expect(await received(c.path)).toEqual([]);
    const spec = JSON.parse(
      (await env.DB.prepare("SELECT spec FROM jobs WHERE id = ?").bind(c.job.id).first<{ spec: string }>())!.spec,
    ) as JobSpec;
    expect(spec.target.url).toBe(`${receiverUrl()}${newPath}`);
  });

  it("PATCH of a one-off job's runAt reschedules it: the old execution is canceled, the new one fires once", async () => {
    const fires = captureFires();
    const c = await create({ delay: "1m" });
    const oldAt = c.firstAt;
    const newAt = Date.now() + 2 * MINUTE;
    const oldId = (await inBucket(c))[0]!.id;

    const res = await patch(c.job.id, { runAt: new Date(newAt).toISOString() });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ status: "active", nextRunAt: new Date(newAt).toISOString() });
    const newId = occurrenceId(c.job.id, newAt);
    expect((await inBucket(c)).map((r) => [r.id, r.status, r.due_at])).toEqual([
      [oldId, "canceled", oldAt],
      [newId, "scheduled", newAt],
    ]);

    travelTo(oldAt);
    await runDurableObjectAlarm(c.stub);
    expect(fires.messages.filter((m) => m.executionId === oldId)).toEqual([]);
    await deliver([await fireOccurrence(fires, c, newAt)]);
    expect((await received(c.path)).map((r) => r.headers["webhook-id"])).toEqual([newId]);
    await flush(c.stub);
    expect((await inD1(c.job.id)).map((r) => [r.id, r.status])).toEqual([
      [oldId, "canceled"],
      [newId, "succeeded"],
    ]);
    expect(await jobStatusInD1(c.job.id)).toBe("completed");
  });
});

describe("validation at the door", () => {
  const target = () => ({ url: `${receiverUrl()}${uniquePath()}` });
  const cases: [string, () => Record<string, unknown>, string][] = [
    ["a cron with 3 fields", () => ({ cron: "* * *" }), "cron"],
    ["a cron with 7 fields", () => ({ cron: "* * * * * * *" }), "cron"],
    ["a minute out of range", () => ({ cron: "61 * * * *" }), "cron"],
    ["words instead of a cron", () => ({ cron: "every day at nine" }), "cron"],
    ["an unknown time zone", () => ({ cron: "0 9 * * *", timezone: "Mars/Olympus" }), "timezone"],
    ["cron with runAt", () => ({ cron: "* * * * *", runAt: new Date(Date.now() + HOUR).toISOString() }), "runAt"],
    ["cron with delay", () => ({ cron: "* * * * *", delay: "5m" }), "delay"],
    ["catchUp without cron", () => ({ catchUp: "one", delay: "1m" }), "catchUp"],
    ["timezone without cron", () => ({ timezone: "Europe/Berlin", delay: "1m" }), "timezone"],
    ["an unknown catchUp policy", () => ({ cron: "* * * * *", catchUp: "some" }), "catchUp"],
    ["maxOccurrences 0", () => ({ cron: "* * * * *", maxOccurrences: 0 }), "maxOccurrences"],
    ["startAt that is no time", () => ({ cron: "* * * * *", startAt: "tomorrow" }), "startAt"],
    ["endAt before startAt", () => ({ cron: "* * * * *", startAt: Date.now() + 2 * HOUR, endAt: Date.now() + HOUR }), "endAt"],
    [
      "a schedule with no occurrence between startAt and endAt",
      () => {
        const startAt = minuteAfter(Date.now() + HOUR) + 1_000;
        return { cron: "* * * * *", startAt, endAt: startAt + 30_000 };
      },
      "endAt",
    ],
  ];

  it.each(cases)("refuses %s with a 400 naming the field", async (_name, fields, field) => {
    const res = await api("/v1/jobs", { method: "POST", body: { target: target(), ...fields() } });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { field: string } }).error.field).toBe(field);
  });

  it("refuses a PATCH that would make a bad schedule or mix the job kinds, naming the field, and leaves the job as it was", async () => {
    captureFires();
    const recurring = await create({ cron: "* * * * *" });
    const oneOff = await create({ delay: "1m" });
    const refusals: [string, unknown, string][] = [
      [recurring.job.id, { cron: "61 * * * *" }, "cron"],
      [recurring.job.id, { timezone: "Nowhere/City" }, "timezone"],
      [recurring.job.id, { runAt: new Date(Date.now() + HOUR).toISOString() }, "runAt"],
      [recurring.job.id, { catchUp: "twice" }, "catchUp"],
      [oneOff.job.id, { cron: "* * * * *" }, "cron"],
      [oneOff.job.id, { catchUp: "none" }, "catchUp"],
    ];
    for (const [id, body, field] of refusals) {
      const res = await patch(id, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(((await res.json()) as { error: { field: string } }).error.field).toBe(field);
    }
    expect((await inBucket(recurring)).map((r) => [r.status, r.due_at])).toEqual([["scheduled", recurring.firstAt]]);
    expect((await inBucket(oneOff)).map((r) => [r.status, r.due_at])).toEqual([["scheduled", oneOff.firstAt]]);
  });

  it("GET /v1/jobs/:id lists the next five occurrences in nextRuns, in the job's time zone", async () => {
    captureFires();
    // 09:00 in Kolkata (UTC+05:30, no daylight saving) is 03:30Z every day
    const daily = await create({ cron: "0 9 * * *", timezone: "Asia/Kolkata" });
    const shown = (await (await api(`/v1/jobs/${daily.job.id}`)).json()) as {
      nextRunAt: string;
      nextRuns: string[];
      schedule: { cron: string; timezone: string; catchUp: string };
    };
    expect(shown.schedule).toMatchObject({ cron: "0 9 * * *", timezone: "Asia/Kolkata", catchUp: "one" });
    expect(shown.nextRuns).toHaveLength(5);
    expect(shown.nextRuns[0]).toBe(shown.nextRunAt);
    const runs = shown.nextRuns.map(Date.parse);
    expect(Date.parse(shown.nextRunAt)).toBe(daily.firstAt);
    expect(runs[0]).toBeGreaterThanOrEqual(Date.now());
    expect(runs[0]! - Date.now()).toBeLessThanOrEqual(DAY);
    for (const [i, at] of runs.entries()) {
      expect(new Date(at).toISOString().slice(11)).toBe("03:30:00.000Z");
      if (i > 0) expect(at - runs[i - 1]!).toBe(DAY);
    }

    // seconds field: every 15 s
    const quick = await create({ cron: "*/15 * * * * *" });
    const q = (await (await api(`/v1/jobs/${quick.job.id}`)).json()) as { nextRuns: string[] };
    const qRuns = q.nextRuns.map(Date.parse);
    expect(qRuns[0]).toBe(Math.ceil(Date.now() / 15_000) * 15_000);
    expect(qRuns.slice(1).map((at, i) => at - qRuns[i]!)).toEqual([15_000, 15_000, 15_000, 15_000]);
  });
});

describe("catch-up after downtime", () => {
  it("one (default): after an hour down, the missed window fires once and the next occurrence is after now, not a storm", async () => {
    const fires = captureFires();
    const c = await create({ cron: "* * * * *" });
    const id1 = occurrenceId(c.job.id, c.firstAt);

    travelTo(c.firstAt + HOUR + 15_000); // the stack was down for an hour
    const now = Date.now();
    expect(await runDurableObjectAlarm(c.stub)).toBe(true);
    await runDurableObjectAlarm(c.stub); // and the alarm runs once more: still no storm
    const next = minuteAfter(now);
    expect((await inBucket(c)).map((r) => [r.id, r.status, r.due_at])).toEqual([
      [id1, "dispatched", c.firstAt],
      [occurrenceId(c.job.id, next), "scheduled", next],
    ]);
    expect(next).toBeGreaterThan(now);
    expect(await sentFor(fires, c)).toEqual([expect.objectContaining({ executionId: id1 })]);
    await deliver(await sentFor(fires, c));
    expect(await received(c.path)).toHaveLength(1);
  });

  it("none: after an hour down, the missed occurrence is canceled (skipped) and the next one is after now", async () => {
    const fires = captureFires();
    const c = await create({ cron: "* * * * *", catchUp: "none" });
    const id1 = occurrenceId(c.job.id, c.firstAt);

    travelTo(c.firstAt + HOUR + 15_000);
    const now = Date.now();
    expect(await runDurableObjectAlarm(c.stub)).toBe(true);
    const next = minuteAfter(now);
    expect((await inBucket(c)).map((r) => [r.id, r.status, r.due_at, r.last_error])).toEqual([
      [id1, "canceled", c.firstAt, "skipped: missed occurrence (catchUp none)"],
      [occurrenceId(c.job.id, next), "scheduled", next, null],
    ]);
    expect(await sentFor(fires, c)).toEqual([]);
    await flush(c.stub);
    expect((await inD1(c.job.id)).map((r) => [r.id, r.status])).toEqual([
      [id1, "canceled"],
      [occurrenceId(c.job.id, next), "scheduled"],
    ]);
    expect(await jobStatusInD1(c.job.id)).toBe("active");
  });

  it("none: when the skipped occurrence was the schedule's last, the job still completes (no occurrence is left to fire)", async () => {
    const fires = captureFires();
    const c = await create({ cron: "* * * * *", catchUp: "none", maxOccurrences: 1 });
    travelTo(c.firstAt + HOUR + 15_000);
    expect(await runDurableObjectAlarm(c.stub)).toBe(true);
    expect((await inBucket(c)).map((r) => [r.status, r.last])).toEqual([["canceled", 1]]);
    expect(await sentFor(fires, c)).toEqual([]);
    await flush(c.stub);
    const shown = (await (await api(`/v1/jobs/${c.job.id}`)).json()) as { status: string; nextRunAt: string | null };
    expect(shown).toMatchObject({ status: "completed", nextRunAt: null });
  });

  it("all: after 5 minutes down every missed occurrence fires, one execution each, then the schedule continues after now", async () => {
    const fires = captureFires();
    const c = await create({ cron: "* * * * *", catchUp: "all" });
    travelTo(c.firstAt + 5 * MINUTE + 15_000);
    const now = Date.now();
    for (let run = 0; run < 10; run++) await runDurableObjectAlarm(c.stub);

    const missed = Array.from({ length: 6 }, (_, i) => c.firstAt + i * MINUTE);
    expect((await sentFor(fires, c)).map((m) => m.dueAt)).toEqual(missed);
    expect(new Set((await sentFor(fires, c)).map((m) => m.executionId)).size).toBe(6);
    expect((await inBucket(c)).filter((r) => r.status === "scheduled").map((r) => r.due_at)).toEqual([minuteAfter(now)]);
  });

  it("all is bounded: after 3 hours down only the 100 most recent missed occurrences fire (plus the one that was due)", async () => {
    const fires = captureFires();
    const c = await create({ cron: "* * * * *", catchUp: "all" });
    travelTo(c.firstAt + 3 * HOUR + 15_000);
    const now = Date.now();
    for (let run = 0; run < 150; run++) {
      await runDurableObjectAlarm(c.stub);
      if ((await inBucket(c)).some((r) => r.status === "scheduled" && r.due_at > now)) break;
    }
    const dues = (await sentFor(fires, c)).map((m) => m.dueAt);
    const lastMissed = minuteAfter(now) - MINUTE;
    expect(dues).toEqual([c.firstAt, ...Array.from({ length: 100 }, (_, i) => lastMissed - (99 - i) * MINUTE)]);
    expect((await inBucket(c)).filter((r) => r.status === "scheduled").map((r) => r.due_at)).toEqual([minuteAfter(now)]);
  });
});

describe("the two layers: D1 for the far future, the bucket for what is due soon", () => {
  it("moves a cron occurrence due beyond the lookahead from the outbox to D1 as pending, not into the bucket; the scan hands it over when its window comes, once", async () => {
    const fires = captureFires();
    // a daily schedule whose first occurrence is 1-2 minutes away, so it is in the bucket
    const firstAt = minuteAtOrAfter(Date.now() + MINUTE);
    const at = new Date(firstAt);
    const c = await create({ cron: `${at.getUTCMinutes()} ${at.getUTCHours()} * * *` });
    expect(c.firstAt).toBe(firstAt);
    const nextAt = firstAt + DAY;
    const idNext = occurrenceId(c.job.id, nextAt);

    // a mirror has just run (lastMirrorAt = now), so the firing alarm below leaves the outbox to the next one
    await bucketSql(c.stub, "UPDATE executions SET dirty = 1 WHERE job_id = ?", c.job.id);
    travelTo(firstAt - MIRROR_DELAY_MS / 2);
    expect(await runDurableObjectAlarm(c.stub)).toBe(true);
    const m1 = await fireOccurrence(fires, c, firstAt);

    // the next occurrence is a day away: into the outbox, not the bucket's executions
    expect((await inBucket(c)).map((r) => r.id)).toEqual([m1.executionId]);
    expect(await bucketSql(c.stub, "SELECT id, occurrence_at, occurrence FROM outbox_pending WHERE job_id = ?", c.job.id)).toEqual([
      { id: idNext, occurrence_at: nextAt, occurrence: 2 },
    ]);
    expect((await inD1(c.job.id)).map((r) => r.id)).toEqual([m1.executionId]);

    // the next mirror writes it to D1 as pending, in its time bucket; the bucket still does not hold it
    advance(MIRROR_DELAY_MS);
    await runDurableObjectAlarm(c.stub);
    expect(await bucketSql(c.stub, "SELECT id FROM outbox_pending WHERE job_id = ?", c.job.id)).toEqual([]);
    expect((await inD1(c.job.id)).find((r) => r.id === idNext)).toEqual({
      id: idNext, status: "pending", due_at: nextAt, time_bucket: Math.floor(nextAt / SCAN_WINDOW_MS), occurrence: 2, attempts: 0,
    });
    expect((await inBucket(c)).map((r) => r.id)).toEqual([m1.executionId]);
    await deliver([m1]);

    // the scan leaves it in D1 while it is beyond the lookahead
    await runScan();
    expect((await inD1(c.job.id)).find((r) => r.id === idNext)?.status).toBe("pending");
    expect((await inBucket(c)).map((r) => r.id)).toEqual([m1.executionId]);

    // the window reaches it: the scan hands it over, and scanning again, or twice at once, changes nothing
    travelTo(nextAt - LOOKAHEAD_MS / 2);
    const before = await counters();
    await runScan();
    await Promise.all([runScan(), runScan()]);
    await env.DB.prepare("UPDATE executions SET status = 'pending' WHERE id = ?").bind(idNext).run(); // as if marking D1 failed
    await Promise.all([runScan(), runScan()]);
    expect((await counters()).scanner_recovered_total! - before.scanner_recovered_total!).toBe(1);
    expect((await inBucket(c)).map((r) => [r.id, r.status, r.occurrence, r.spawned])).toEqual([
      [m1.executionId, "succeeded", 1, 1],
      [idNext, "scheduled", 2, 0],
    ]);
    expect((await inD1(c.job.id)).find((r) => r.id === idNext)?.status).toBe("scheduled");

    // and it fires by the alarm; the one after it goes the same way, to D1 as pending
    await deliver([await fireOccurrence(fires, c, nextAt)]);
    expect((await received(c.path)).map((r) => r.headers["webhook-id"])).toEqual([m1.executionId, idNext]);
    await flush(c.stub);
    const third = occurrenceId(c.job.id, nextAt + DAY);
    expect((await inD1(c.job.id)).map((r) => [r.id, r.status, r.occurrence])).toEqual([
      [m1.executionId, "succeeded", 1],
      [idNext, "succeeded", 2],
      [third, "pending", 3],
    ]);
    expect((await inBucket(c)).map((r) => r.id)).not.toContain(third);
  });

  it("keeps a one-off due in 30 days only in D1 (pending, not in the bucket) until the scan window reaches it; then the scan hands it over once and it fires by the alarm", async () => {
    const fires = captureFires();
    const dueAt = Date.now() + 30 * DAY;
    const c = await create({ runAt: new Date(dueAt).toISOString() });
    const [row] = await inD1(c.job.id);
    expect(row).toMatchObject({ status: "pending", due_at: dueAt, time_bucket: Math.floor(dueAt / SCAN_WINDOW_MS) });
    expect(await inBucket(c)).toEqual([]);

    // scans before the window reaches it leave it in D1
    await runScan();
    travelTo(dueAt - LOOKAHEAD_MS - MINUTE);
    await runScan();
    expect((await inD1(c.job.id))[0]!.status).toBe("pending");
    expect(await inBucket(c)).toEqual([]);

    // the window reaches it: handed to its bucket once, however many scans run
    travelTo(dueAt - LOOKAHEAD_MS + MINUTE);
    const before = await counters();
    await Promise.all([runScan(), runScan()]);
    await runScan();
    expect((await counters()).scanner_recovered_total! - before.scanner_recovered_total!).toBe(1);
    expect((await inD1(c.job.id))[0]!.status).toBe("scheduled");
    expect((await inBucket(c)).map((r) => [r.id, r.status, r.due_at])).toEqual([[row!.id, "scheduled", dueAt]]);
    expect(await alarmOf(c.stub)).toBeLessThanOrEqual(quantized(dueAt));

    // and it fires by the alarm, once
    await deliver([await fireOccurrence(fires, c, dueAt)]);
    expect((await received(c.path)).map((r) => r.headers["webhook-id"])).toEqual([row!.id]);
    await flush(c.stub);
    expect((await inD1(c.job.id))[0]).toMatchObject({ status: "succeeded", attempts: 1 });
  });
});
