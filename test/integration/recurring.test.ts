/**
 * Recurring (cron) jobs inside workerd, on the revision-2 data path (docs/data-path.md). Proves:
 * - a recurring job is one `schedules` row in its bucket from create (whatever the distance to its
 *   first occurrence) with next_at and fired; the bucket's alarm at next_at creates the occurrence
 *   as an execution, fires it and plans the next one. Repeated alarms, a repeated hand-off of the
 *   same version and the sync pass never make two of one occurrence;
 * - each occurrence is its own execution whose id follows from (job, due time): the webhook-id is
 *   the same on duplicate messages and on retried attempts (invariant 5, 7);
 * - D1 history: an occurrence lands in `occurrences` once terminal; the bucket projects
 *   jobs.next_run_at and jobs.fired at the flush; a schedule with no occurrence left and none live
 *   projects jobs.status = completed (maxOccurrences, endAt, catchUp "none" skipping the last);
 * - catch-up after downtime: one (default), none, all (bounded);
 * - pause (nothing new fires; what has not started is canceled), resume (continues from the next
 *   future occurrence; the missed ones never fire; the fired count is kept), cancel;
 * - pause and cancel win over a running attempt's retry: the attempt finishes, and if it fails it
 *   ends canceled instead of being retried;
 * - PATCH of the schedule (what was scheduled under the old one is canceled, the new one starts
 *   from its next occurrence), of only the target, and of a one-off job's runAt;
 * - validation at the door (400 naming the field);
 * - the two layers: a recurring job is handed to its bucket at create and its alarm is armed for
 *   the next occurrence even a day away; a lost hand-off is healed by the sync pass; a far one-off
 *   waits only in D1 until the lookahead reaches it.
 *
 * Time: one file-wide virtual clock (helpers.fileClock), HEAD_START_MS ahead of the real clock, so
 * no alarm fires on its own: the tests run the alarms. Fire messages are captured for the whole
 * file and fed to the consumer with fire(). Storage is shared by the tests of this file: each test
 * uses its own jobs and cancels them when done; the clock only moves forward, so the long travels
 * (a day, 30 days) come last.
 */
import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";
import { describe, expect, it, onTestFinished, vi } from "vitest";
import type { ClaimResult, FireMessage, LiveExecution } from "../../src/bucket/protocol";
import { occurrenceId, oneOffExecutionId } from "../../src/core/id";
import type { HttpTarget, JobSpec } from "../../src/core/job";
import type { DeliveryOutcome } from "../../src/core/response";
import { definitionOf } from "../../src/db/job-definition";
import { dbOf } from "../../src/db/kit";
import { getJob } from "../../src/db/list-jobs";
import {
  alarmOf,
  api,
  bucketSql,
  bucketStub,
  CONFIG,
  captureFiresForFile,
  counters,
  createJob,
  d1Of,
  fileClock,
  fire,
  type JobJson,
  jobRow,
  live,
  received,
  receiverUrl,
  runAlarm,
  runScan,
  uniquePath,
} from "./helpers";

const SECRET = CONFIG.WEBHOOK_SECRET; // vitest.config.ts
const HEAD_START_MS = 10 * 60_000;
const MINUTE = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;
const LOOKAHEAD_MS = CONFIG.LOOKAHEAD_MS;
const QUANTUM_MS = CONFIG.ALARM_QUANTUM_MS;
const quantized = (at: number) => Math.ceil(at / QUANTUM_MS) * QUANTUM_MS;

// ---------------------------------------------------------------------------------------------
// the file's clock and queue

const clock = fileClock(HEAD_START_MS);
const sent = captureFiresForFile();

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
  /** the job's first run time (D1 next_run_at at create) */
  firstAt: number;
}

/** Creates a job (cron or one-off) at the receiver and cancels it when the test ends. */
async function create(fields: Record<string, unknown>, kind = "ok"): Promise<Created> {
  const path = uniquePath(kind);
  const job = await createJob({ target: { url: `${receiverUrl()}${path}` }, ...fields });
  const row = await jobRow(job.id);
  if (!row || row.next_run_at === null) throw new Error("no D1 row for the new job");
  onTestFinished(async () => {
    // outcomes first (the bucket then holds nothing finished of the job), then the cancel;
    // 409 once completed: nothing left to stop
    await clock.flush(bucketStub(row.bucket));
    await api(`/v1/jobs/${job.id}`, { method: "DELETE" });
  });
  return { job, bucket: row.bucket, stub: bucketStub(row.bucket), path, firstAt: row.next_run_at };
}

interface Schedule {
  version: number;
  status: string;
  next_at: number | null;
  fired: number;
}

/** The job's schedule row in its bucket, or undefined. */
async function scheduleOf(c: Created): Promise<Schedule | undefined> {
  return (await bucketSql<Schedule>(c.stub, "SELECT version, status, next_at, fired FROM schedules WHERE id = ?", c.job.id))[0];
}

/** The job's executions its bucket holds (live view), earliest occurrence first. */
async function liveOf(c: Created): Promise<LiveExecution[]> {
  return (await c.stub.inspect({ jobId: c.job.id })).sort((a, b) => a.occurrenceAt - b.occurrenceAt);
}

/** [id, status, occurrence] of what the bucket holds. */
async function heldOf(c: Created): Promise<[string, string, number][]> {
  return (await liveOf(c)).map((e) => [e.executionId, e.status, e.occurrence]);
}

interface D1Occurrence {
  id: string;
  status: string;
  due_at: number;
  occurrence: number;
  attempts: number;
  last_http_status: number | null;
  last_error: string | null;
  dead_reason: string | null;
}

/** The job's finished occurrences in D1 (`occurrences`), earliest first. */
async function history(jobId: string): Promise<D1Occurrence[]> {
  const { results } = await d1Of(jobId)
    .prepare(
      `SELECT id, status, due_at, occurrence, attempts, last_http_status, last_error, dead_reason
     FROM occurrences WHERE job_id = ? ORDER BY due_at`,
    )
    .bind(jobId)
    .all<D1Occurrence>();
  return results;
}

/** Fire messages sent so far for one execution. */
function sentOf(executionId: string): FireMessage[] {
  return sent.filter((m) => m.executionId === executionId);
}

/** Fire messages sent so far for any execution of the job (ids end with the job's random part). */
function sentFor(c: Created): FireMessage[] {
  const suffix = c.job.id.slice(-16);
  return sent.filter((m) => m.executionId.endsWith(suffix));
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

/**
 * Moves to an occurrence's due time and runs the bucket's alarm (which must be armed); returns
 * the occurrence's one fire message.
 */
async function fireOccurrence(c: Created, at: number): Promise<FireMessage> {
  const id = occurrenceId(c.job.id, at);
  clock.travelTo(Math.max(at, clock.at));
  expect(await runDurableObjectAlarm(c.stub)).toBe(true);
  const messages = sentOf(id);
  expect(messages).toHaveLength(1);
  return messages[0]!;
}

/** A lease taken as the consumer takes it (claim RPC), for tests that act while an attempt runs. */
async function claim(c: Created, m: FireMessage): Promise<Extract<ClaimResult, { ok: true }>> {
  const [result] = await c.stub.claim([{ executionId: m.executionId, dueAt: m.dueAt }]);
  if (!result?.ok) throw new Error(`claim refused: ${JSON.stringify(result)}`);
  return result;
}

const FAILED_503: DeliveryOutcome = { kind: "failed", failure: "retryable", httpStatus: 503, error: "HTTP 503: not yet" };

async function shown(jobId: string) {
  return (await (await api(`/v1/jobs/${jobId}`)).json()) as JobJson & {
    nextRuns: string[];
    latestExecution: { id: string; status: string } | null;
  };
}

// ---------------------------------------------------------------------------------------------

describe("occurrences: the bucket's alarm creates each one when due and plans the next", () => {
  it("holds the job as one schedule row from create; the alarm at next_at creates the occurrence (own id = webhook-id), fires it and plans the next; D1 gets the history and the next_run_at/fired projections", async () => {
    const c = await create({ cron: "* * * * *" });
    const first = minuteAtOrAfter(Date.now());
    const [second, third] = [first + MINUTE, first + 2 * MINUTE];
    const [id1, id2] = [occurrenceId(c.job.id, first), occurrenceId(c.job.id, second)];
    expect(c.firstAt).toBe(first);
    expect(Date.parse(c.job.nextRunAt!)).toBe(first);

    // create: D1 has the definition (synced: the bucket acknowledged it), the bucket the schedule,
    // and no execution exists before the occurrence is due; the alarm is armed for it
    expect(await jobRow(c.job.id)).toMatchObject({ status: "active", version: 1, synced: 1, next_run_at: first, fired: 0 });
    expect(await scheduleOf(c)).toEqual({ version: 1, status: "active", next_at: first, fired: 0 });
    expect(await liveOf(c)).toEqual([]);
    const armed = await alarmOf(c.stub);
    expect(armed).not.toBeNull();
    expect(armed!).toBeLessThanOrEqual(quantized(first));

    // occurrence 1 falls due: the alarm creates it, dispatches it and plans occurrence 2
    const m1 = await fireOccurrence(c, first);
    expect(m1).toEqual({ v: 1, executionId: id1, bucket: c.bucket, tenant: "acme", dueAt: first });
    expect(await scheduleOf(c)).toEqual({ version: 1, status: "active", next_at: second, fired: 1 });
    expect(await heldOf(c)).toEqual([[id1, "dispatched", 1]]);
    await deliver([m1]);
    expect(await heldOf(c)).toEqual([[id1, "succeeded", 1]]);

    // occurrence 2 the same way
    const m2 = await fireOccurrence(c, second);
    expect(m2).toMatchObject({ executionId: id2, dueAt: second });
    await deliver([m2]);
    expect(await scheduleOf(c)).toMatchObject({ next_at: third, fired: 2 });

    // each delivery is its own execution: its own webhook-id and idempotency key, signed, same job
    const got = await received(c.path);
    expect(got.map((r) => r.headers["webhook-id"])).toEqual([id1, id2]);
    for (const r of got) {
      expect(r.headers["idempotency-key"]).toBe(r.headers["webhook-id"]);
      expect(r.headers["x-scheduler-job-id"]).toBe(c.job.id);
      expect(r.headers["x-scheduler-attempt"]).toBe("1");
      new Webhook(SECRET).verify(r.body, r.headers);
    }

    // the flush: one history row per finished occurrence, the job's next occurrence and fired count
    // projected, and the bucket lets the finished rows go
    await clock.flush(c.stub);
    expect(await history(c.job.id)).toEqual([
      {
        id: id1,
        status: "succeeded",
        due_at: first,
        occurrence: 1,
        attempts: 1,
        last_http_status: 200,
        last_error: null,
        dead_reason: null,
      },
      {
        id: id2,
        status: "succeeded",
        due_at: second,
        occurrence: 2,
        attempts: 1,
        last_http_status: 200,
        last_error: null,
        dead_reason: null,
      },
    ]);
    expect(await jobRow(c.job.id)).toMatchObject({ status: "active", version: 1, next_run_at: third, fired: 2 });
    expect(await liveOf(c)).toEqual([]);

    // the API reads the same history
    const listed = (await (await api(`/v1/jobs/${c.job.id}/executions`)).json()) as { executions: { id: string; status: string }[] };
    expect(listed.executions.map((e) => [e.id, e.status])).toEqual([
      [id2, "succeeded"],
      [id1, "succeeded"],
    ]);
    const job = await shown(c.job.id);
    expect(job).toMatchObject({
      status: "active",
      nextRunAt: new Date(third).toISOString(),
      latestExecution: { id: id2, status: "succeeded" },
    });
    const one = (await (await api(`/v1/executions/${id1}`)).json()) as { id: string; status: string; jobId: string };
    expect(one).toMatchObject({ id: id1, jobId: c.job.id, status: "succeeded" });
  });

  it("never makes two of one occurrence: repeated alarms, a repeated hand-off of the held version, the sync pass, a duplicate message", async () => {
    const c = await create({ cron: "* * * * *" });
    const [first, second] = [c.firstAt, c.firstAt + MINUTE];
    const id1 = occurrenceId(c.job.id, first);

    // the alarm runs three times at the due time: one occurrence, one message
    clock.travelTo(Math.max(first, clock.at));
    for (let i = 0; i < 3; i++) await runAlarm(c.stub);
    expect(sentOf(id1)).toHaveLength(1);
    expect(await heldOf(c)).toEqual([[id1, "dispatched", 1]]);
    expect(await scheduleOf(c)).toEqual({ version: 1, status: "active", next_at: second, fired: 1 });

    // the version the bucket holds, handed over again (a retried create or change): a no-op
    const definition = definitionOf((await getJob(dbOf(d1Of(c.job.id)), "acme", c.job.id))!);
    expect(definition).toMatchObject({ version: 1, recurring: true, status: "active" });
    expect(await c.stub.applyJobs(c.bucket, [definition])).toEqual([{ jobId: c.job.id, version: 1 }]);
    expect(await scheduleOf(c)).toEqual({ version: 1, status: "active", next_at: second, fired: 1 });

    // the sync pass pulls the job (due within the lookahead as D1 has it), alone and twice at once
    await runScan();
    await Promise.all([runScan(), runScan()]);
    await runAlarm(c.stub);
    expect(await scheduleOf(c)).toEqual({ version: 1, status: "active", next_at: second, fired: 1 });
    expect(sentOf(id1)).toHaveLength(1);
    expect(await heldOf(c)).toEqual([[id1, "dispatched", 1]]);

    // the message delivered twice (the queue is at-least-once) is one delivery; both acked
    const before = await counters();
    const [m1] = sentOf(id1);
    await deliver([m1!, m1!]);
    expect(await received(c.path)).toHaveLength(1);
    expect((await counters()).duplicates_suppressed_total! - before.duplicates_suppressed_total!).toBe(1);

    // and once more after the flush (the bucket let the row go): still a duplicate
    await clock.flush(c.stub);
    await deliver([m1!]);
    expect(await received(c.path)).toHaveLength(1);
    expect((await history(c.job.id)).map((r) => [r.id, r.status, r.occurrence])).toEqual([[id1, "succeeded", 1]]);
  });

  it("derives an occurrence's id from (job, due time): a retried attempt carries the same webhook-id, and the message of the earlier attempt is a duplicate", async () => {
    const c = await create({ cron: "* * * * *", retry: { initialDelayMs: 1_000, jitter: 0 } }, "flaky/1");
    const id1 = occurrenceId(c.job.id, c.firstAt);
    const m1 = await fireOccurrence(c, c.firstAt);
    expect(m1.executionId).toBe(id1);

    // attempt 1 fails (503): the same execution waits for its retry at a new due time
    await deliver([m1]);
    const [waiting] = await liveOf(c);
    expect(waiting).toMatchObject({ executionId: id1, status: "scheduled", attempts: 1, occurrenceAt: c.firstAt, lastHttpStatus: 503 });
    expect(waiting!.dueAt).toBe(clock.at + 1_000);

    // the retry is sent under the same id with its own due time
    clock.travelTo(waiting!.dueAt);
    await runAlarm(c.stub);
    const messages = sentOf(id1);
    expect(messages.map((m) => m.dueAt)).toEqual([c.firstAt, waiting!.dueAt]);

    // the first message again (a late duplicate) and the retry's, in one batch: one delivery
    await deliver([m1, messages[1]!]);
    const got = await received(c.path);
    expect(got.map((r) => [r.headers["webhook-id"], r.headers["idempotency-key"], r.headers["x-scheduler-attempt"]])).toEqual([
      [id1, id1, "1"],
      [id1, id1, "2"],
    ]);
    await clock.flush(c.stub);
    expect(await history(c.job.id)).toEqual([
      {
        id: id1,
        status: "succeeded",
        due_at: c.firstAt,
        occurrence: 1,
        attempts: 2,
        last_http_status: 200,
        last_error: null,
        dead_reason: null,
      },
    ]);
  });
});

describe("the end of a schedule: maxOccurrences, endAt", () => {
  it("stops at maxOccurrences: nothing is planned after the last occurrence, and the job completes in D1 once that one is terminal", async () => {
    const c = await create({ cron: "* * * * *", maxOccurrences: 2 });
    const [first, second] = [c.firstAt, c.firstAt + MINUTE];
    await deliver([await fireOccurrence(c, first)]);

    const m2 = await fireOccurrence(c, second);
    // occurrence 2 is the last: the schedule has no next occurrence
    expect(await scheduleOf(c)).toEqual({ version: 1, status: "active", next_at: null, fired: 2 });
    await clock.flush(c.stub);
    // the last occurrence is live: the job is not completed yet
    expect(await jobRow(c.job.id)).toMatchObject({ status: "active", fired: 2 });

    await deliver([m2]);
    await clock.flush(c.stub);
    expect((await history(c.job.id)).map((r) => [r.occurrence, r.status])).toEqual([
      [1, "succeeded"],
      [2, "succeeded"],
    ]);
    expect(await jobRow(c.job.id)).toMatchObject({ status: "completed", fired: 2 });
    expect(await shown(c.job.id)).toMatchObject({ status: "completed", nextRunAt: null, nextRuns: [] });

    // later alarms fire nothing more
    clock.travelTo(second + 3 * MINUTE);
    await runAlarm(c.stub);
    expect(sentFor(c)).toHaveLength(2);
    expect(await received(c.path)).toHaveLength(2);
    expect(await liveOf(c)).toEqual([]);
  });

  it("stops at endAt: the occurrence before endAt is the last, and the job completes in D1 once it is terminal", async () => {
    const first = minuteAtOrAfter(Date.now());
    const c = await create({ cron: "* * * * *", endAt: new Date(first + MINUTE + 30_000).toISOString() });
    expect(c.firstAt).toBe(first);
    await deliver([await fireOccurrence(c, first)]);
    expect(await scheduleOf(c)).toMatchObject({ next_at: first + MINUTE, fired: 1 });
    const m2 = await fireOccurrence(c, first + MINUTE);
    expect(await scheduleOf(c)).toMatchObject({ next_at: null, fired: 2 });
    await deliver([m2]);
    await clock.flush(c.stub);
    expect((await history(c.job.id)).map((r) => r.status)).toEqual(["succeeded", "succeeded"]);
    await runScan(); // the sync pass (the job is active and "due" in D1) does not complete it either
    await clock.flush(c.stub);
    expect(await jobRow(c.job.id)).toMatchObject({ status: "completed", fired: 2 });

    clock.travelTo(first + 4 * MINUTE);
    await runAlarm(c.stub);
    expect(sentFor(c)).toHaveLength(2);
  });

  it("lists in nextRuns only the occurrences maxOccurrences still allows after some fired (the fired projection)", async () => {
    const c = await create({ cron: "* * * * *", maxOccurrences: 2 });
    expect((await shown(c.job.id)).nextRuns.map(Date.parse)).toEqual([c.firstAt, c.firstAt + MINUTE]);

    await deliver([await fireOccurrence(c, c.firstAt)]);
    await clock.flush(c.stub);
    expect(await jobRow(c.job.id)).toMatchObject({ fired: 1, next_run_at: c.firstAt + MINUTE });
    // one of two fired: only the second is still to come
    const after = await shown(c.job.id);
    expect(after.status).toBe("active");
    expect(after.nextRuns.map(Date.parse)).toEqual([c.firstAt + MINUTE]);
  });
});

describe("pause, resume, cancel", () => {
  it("pause stops new executions: 200 paused, an occurrence in flight is canceled (its message acked, not delivered), the alarm fires nothing for the job", async () => {
    const c = await create({ cron: "* * * * *" });
    const [first, second] = [c.firstAt, c.firstAt + MINUTE];
    const [id1, id2] = [occurrenceId(c.job.id, first), occurrenceId(c.job.id, second)];
    await deliver([await fireOccurrence(c, first)]);
    await clock.flush(c.stub);
    const m2 = await fireOccurrence(c, second); // dispatched, not yet claimed

    const res = await changeJob(c.job.id, "pause");
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ id: c.job.id, status: "paused", nextRunAt: null });
    expect(await jobRow(c.job.id)).toMatchObject({ status: "paused", version: 2, synced: 1 });
    expect(await scheduleOf(c)).toEqual({ version: 2, status: "paused", next_at: null, fired: 2 });
    const [canceled] = await liveOf(c);
    expect(canceled).toMatchObject({ executionId: id2, status: "canceled", lastError: "paused" });

    // the message in flight reaches the consumer: acked, nothing delivered
    await deliver([m2]);
    expect((await received(c.path)).map((r) => r.headers["webhook-id"])).toEqual([id1]);

    // past the next occurrences: nothing fires, nothing new is made
    clock.travelTo(first + 4 * MINUTE);
    await runAlarm(c.stub);
    expect(sentFor(c).map((m) => m.executionId)).toEqual([id1, id2]);
    await clock.flush(c.stub);
    expect((await history(c.job.id)).map((r) => [r.id, r.status, r.attempts, r.last_error])).toEqual([
      [id1, "succeeded", 1, null],
      [id2, "canceled", 0, "paused"],
    ]);
    expect(await liveOf(c)).toEqual([]);

    // pausing again is a no-op; a one-off job cannot be paused (cancel it instead)
    const again = await changeJob(c.job.id, "pause");
    expect(again.status).toBe(200);
    expect(((await again.json()) as { status: string }).status).toBe("paused");
    expect(await jobRow(c.job.id)).toMatchObject({ version: 2 });
    const oneOff = await create({ delay: "1m" });
    const refused = await changeJob(oneOff.job.id, "pause");
    expect(refused.status).toBe(409);
    expect(await refused.json()).toMatchObject({ error: { code: "not_recurring", field: "id" } });
  });

  it("resume continues from the next future occurrence: status active, the occurrences missed while paused never fire", async () => {
    const c = await create({ cron: "* * * * *" });
    const first = c.firstAt;
    await deliver([await fireOccurrence(c, first)]);
    await clock.flush(c.stub);
    expect((await changeJob(c.job.id, "pause")).status).toBe(200);
    await clock.flush(c.stub);

    // paused across two occurrences
    clock.travelTo(first + 2 * MINUTE + 30_000);
    const now = Date.now();
    const res = await changeJob(c.job.id, "resume");
    expect(res.status).toBe(200);
    const next = minuteAfter(now);
    expect(next).toBeGreaterThan(now);
    expect(await res.json()).toMatchObject({ status: "active", nextRunAt: new Date(next).toISOString() });
    expect(await jobRow(c.job.id)).toMatchObject({ status: "active", version: 3, synced: 1, next_run_at: next });
    expect(await scheduleOf(c)).toEqual({ version: 3, status: "active", next_at: next, fired: 1 });

    // the alarm runs now: the missed occurrences (first + 1, + 2 minutes) are not made
    await runAlarm(c.stub);
    expect(sentFor(c)).toHaveLength(1);
    expect(await liveOf(c)).toEqual([]);

    // the next one fires, as the job's second occurrence
    const idNext = occurrenceId(c.job.id, next);
    await deliver([await fireOccurrence(c, next)]);
    expect((await received(c.path)).map((r) => r.headers["webhook-id"])).toEqual([occurrenceId(c.job.id, first), idNext]);
    await clock.flush(c.stub);
    expect((await history(c.job.id)).map((r) => [r.due_at, r.occurrence, r.status])).toEqual([
      [first, 1, "succeeded"],
      [next, 2, "succeeded"],
    ]);
    for (const missed of [first + MINUTE, first + 2 * MINUTE]) expect(sentOf(occurrenceId(c.job.id, missed))).toEqual([]);

    // resuming an active job is a no-op
    const again = await changeJob(c.job.id, "resume");
    expect(again.status).toBe(200);
    expect(((await again.json()) as { status: string }).status).toBe("active");
    expect(await jobRow(c.job.id)).toMatchObject({ version: 3 });
  });

  it("pause then resume before the next due time: that same occurrence (same execution id) fires, once", async () => {
    const c = await create({ cron: "* * * * *" });
    await deliver([await fireOccurrence(c, c.firstAt)]);
    const second = c.firstAt + MINUTE;
    const id2 = occurrenceId(c.job.id, second);
    await clock.flush(c.stub);

    expect((await changeJob(c.job.id, "pause")).status).toBe(200);
    await clock.flush(c.stub);
    expect((await changeJob(c.job.id, "resume")).status).toBe(200);
    expect(await scheduleOf(c)).toMatchObject({ status: "active", next_at: second, fired: 1 });

    await deliver([await fireOccurrence(c, second)]);
    expect((await received(c.path)).map((r) => r.headers["webhook-id"])).toEqual([occurrenceId(c.job.id, c.firstAt), id2]);
    await clock.flush(c.stub);
    expect((await history(c.job.id)).map((r) => [r.id, r.status, r.occurrence])).toEqual([
      [occurrenceId(c.job.id, c.firstAt), "succeeded", 1],
      [id2, "succeeded", 2],
    ]);
  });

  it("pause and an immediate resume keep the fired count: maxOccurrences 3 fires exactly 3 times", async () => {
    const c = await create({ cron: "* * * * *", maxOccurrences: 3 });
    const [first, second, third] = [c.firstAt, c.firstAt + MINUTE, c.firstAt + 2 * MINUTE];
    // fired and delivered; the pause and the resume follow each other at once
    await deliver([await fireOccurrence(c, first)]);
    await clock.flush(c.stub);
    expect((await changeJob(c.job.id, "pause")).status).toBe(200);
    expect((await changeJob(c.job.id, "resume")).status).toBe(200);
    expect(await scheduleOf(c)).toEqual({ version: 3, status: "active", next_at: second, fired: 1 });

    await deliver([await fireOccurrence(c, second)]);
    expect(await scheduleOf(c)).toMatchObject({ next_at: third, fired: 2 });
    await deliver([await fireOccurrence(c, third)]);
    // three of three fired: nothing after the third
    expect(await scheduleOf(c)).toMatchObject({ next_at: null, fired: 3 });
    clock.travelTo(third + 2 * MINUTE);
    await runAlarm(c.stub);
    expect(sentFor(c).map((m) => m.dueAt)).toEqual([first, second, third]);
    expect(await received(c.path)).toHaveLength(3);
  });

  it("pause and cancel win over a running attempt's retry: the attempt finishes, and failing it ends canceled, never retried", async () => {
    const retry = { initialDelayMs: 1_000, jitter: 0 };
    const paused = await create({ cron: "* * * * *", retry });
    const canceled = await create({ cron: "* * * * *", retry });
    const mp = await fireOccurrence(paused, paused.firstAt);
    const mc = await fireOccurrence(canceled, canceled.firstAt);

    // the consumer holds leases on both occurrences: their attempts are running
    const lp = await claim(paused, mp);
    const lc = await claim(canceled, mc);

    // meanwhile one job is paused and the other canceled: applied at once (200)
    expect((await changeJob(paused.job.id, "pause")).status).toBe(200);
    expect((await api(`/v1/jobs/${canceled.job.id}`, { method: "DELETE" })).status).toBe(200);
    // a running attempt is left to finish
    expect(await heldOf(paused)).toEqual([[mp.executionId, "running", 1]]);
    expect(await heldOf(canceled)).toEqual([[mc.executionId, "running", 1]]);

    // both attempts fail with a retryable 503: not retried, canceled
    expect(await paused.stub.complete([{ executionId: mp.executionId, token: lp.token, outcome: FAILED_503 }])).toEqual([
      { ok: true, executionId: mp.executionId, status: "canceled" },
    ]);
    expect(await canceled.stub.complete([{ executionId: mc.executionId, token: lc.token, outcome: FAILED_503 }])).toEqual([
      { ok: true, executionId: mc.executionId, status: "canceled" },
    ]);

    // past the would-be retry: nothing is sent again; the original message is a duplicate
    clock.advance(5_000);
    await runAlarm(paused.stub);
    await runAlarm(canceled.stub);
    expect(sentOf(mp.executionId)).toHaveLength(1);
    expect(sentOf(mc.executionId)).toHaveLength(1);
    await deliver([mp, mc]);
    expect(await received(paused.path)).toEqual([]);
    expect(await received(canceled.path)).toEqual([]);

    await clock.flush(paused.stub);
    await clock.flush(canceled.stub);
    for (const [c, m] of [
      [paused, mp],
      [canceled, mc],
    ] as const) {
      expect(await history(c.job.id)).toEqual([
        {
          id: m.executionId,
          status: "canceled",
          due_at: m.dueAt,
          occurrence: 1,
          attempts: 1,
          last_http_status: 503,
          last_error: "HTTP 503: not yet",
          dead_reason: null,
        },
      ]);
    }
    expect(await jobRow(paused.job.id)).toMatchObject({ status: "paused" });
    expect(await jobRow(canceled.job.id)).toMatchObject({ status: "canceled" });
  });

  it("a running attempt of a paused job that succeeds stays succeeded; an occurrence waiting for its retry is canceled by the pause", async () => {
    const c = await create({ cron: "* * * * *", retry: { initialDelayMs: 30_000, jitter: 0 } }, "flaky/1");
    const first = c.firstAt;
    const m1 = await fireOccurrence(c, first);
    const lease = await claim(c, m1);
    expect((await changeJob(c.job.id, "pause")).status).toBe(200);
    expect(
      await c.stub.complete([
        { executionId: m1.executionId, token: lease.token, outcome: { kind: "succeeded", httpStatus: 200, excerpt: "ok" } },
      ]),
    ).toEqual([{ ok: true, executionId: m1.executionId, status: "succeeded" }]);
    await clock.flush(c.stub);
    expect((await history(c.job.id)).map((r) => [r.id, r.status, r.attempts])).toEqual([[m1.executionId, "succeeded", 1]]);

    // resumed: the next occurrence fails once (503) and waits 30 s for its retry; paused again meanwhile
    expect((await changeJob(c.job.id, "resume")).status).toBe(200);
    const next = (await scheduleOf(c))!.next_at!;
    const m2 = await fireOccurrence(c, next);
    await deliver([m2]);
    expect(await heldOf(c)).toEqual([[m2.executionId, "scheduled", 2]]);
    expect((await changeJob(c.job.id, "pause")).status).toBe(200);
    expect(await heldOf(c)).toEqual([[m2.executionId, "canceled", 2]]);

    clock.advance(60_000);
    await runAlarm(c.stub);
    expect(sentOf(m2.executionId)).toHaveLength(1);
    expect((await received(c.path)).map((r) => r.headers["webhook-id"])).toEqual([m2.executionId]); // only the failed attempt
    await clock.flush(c.stub);
    expect((await history(c.job.id)).map((r) => [r.id, r.status, r.attempts])).toEqual([
      [m1.executionId, "succeeded", 1],
      [m2.executionId, "canceled", 1],
    ]);
  });

  it("canceled_total agrees with the executions the API shows canceled, whatever the distance: a pause a day before the next occurrence cancels none, a pause of one waiting for its retry cancels it, a one-off canceled an hour ahead counts", async () => {
    const canceledShown = async (jobId: string) => {
      const { executions } = (await (await api(`/v1/jobs/${jobId}/executions`)).json()) as { executions: { status: string }[] };
      return executions.filter((e) => e.status === "canceled").length;
    };
    const before = (await counters()).canceled_total!;

    const daily = await create({ cron: "0 3 * * *" }); // its first occurrence is hours away
    expect((await changeJob(daily.job.id, "pause")).status).toBe(200);
    const retrying = await create({ cron: "* * * * *", retry: { initialDelayMs: 30_000, jitter: 0 } }, "fail/503");
    await deliver([await fireOccurrence(retrying, retrying.firstAt)]);
    expect((await changeJob(retrying.job.id, "pause")).status).toBe(200);
    const oneOff = await create({ delay: "1h" });
    expect((await api(`/v1/jobs/${oneOff.job.id}`, { method: "DELETE" })).status).toBe(200);
    // a cancel that arrives after the execution succeeded (its outcome not yet in D1) cancels nothing
    const done = await create({ delay: "2m" });
    clock.travelTo(Math.max(clock.at, done.firstAt));
    await runAlarm(done.stub);
    await deliver(sentOf(oneOffExecutionId(done.job.id)));
    expect([200, 202]).toContain((await api(`/v1/jobs/${done.job.id}`, { method: "DELETE" })).status);
    for (const c of [daily, retrying, oneOff, done]) await clock.flush(c.stub);
    await runScan(); // the sync pass re-applies anything unsynced: still nothing more counted

    const jobs = [daily, retrying, oneOff, done];
    const shownCanceled = await Promise.all(jobs.map((c) => canceledShown(c.job.id)));
    expect(shownCanceled).toEqual([0, 1, 1, 0]);
    expect((await counters()).canceled_total! - before).toBe(2);
  });

  it("a pause right after an occurrence succeeded (its outcome not yet in D1) is applied at once: 200, nothing more fires, the occurrence stays succeeded", async () => {
    const c = await create({ cron: "* * * * *" });
    const m1 = await fireOccurrence(c, c.firstAt);
    await deliver([m1]);
    expect(await heldOf(c)).toEqual([[m1.executionId, "succeeded", 1]]); // on its way to D1 (the next flush)

    const res = await changeJob(c.job.id, "pause");
    expect(res.status).toBe(200);
    expect(await scheduleOf(c)).toMatchObject({ version: 2, status: "paused", next_at: null });
    expect(await heldOf(c)).toEqual([[m1.executionId, "succeeded", 1]]);

    // the next occurrence's time: the paused job fires nothing
    clock.travelTo(c.firstAt + MINUTE);
    await runAlarm(c.stub);
    expect(sentFor(c)).toEqual([m1]);
    await clock.flush(c.stub);
    expect((await history(c.job.id)).map((r) => [r.id, r.status])).toEqual([[m1.executionId, "succeeded"]]);
  });

  it("a PATCH of the schedule right after an occurrence died (not yet in D1) is applied at once: 200, the occurrence stays dead and reaches the dead-letter list", async () => {
    const c = await create({ cron: "* * * * *" }, "fail/400");
    const m1 = await fireOccurrence(c, c.firstAt);
    await deliver([m1]); // 400: permanent, dead
    expect(await heldOf(c)).toEqual([[m1.executionId, "dead", 1]]);

    const now = Date.now();
    const res = await patch(c.job.id, { cron: "30 * * * * *" });
    expect(res.status).toBe(200);
    expect(await scheduleOf(c)).toMatchObject({ version: 2, status: "active", next_at: minuteAtOrAfter(now - 30_000) + 30_000 });
    expect(await heldOf(c)).toEqual([[m1.executionId, "dead", 1]]);

    await clock.flush(c.stub);
    expect((await history(c.job.id)).map((r) => [r.id, r.status, r.dead_reason])).toEqual([[m1.executionId, "dead", "permanent"]]);
    const dead = await d1Of(m1.executionId)
      .prepare("SELECT execution_id FROM dead_letters WHERE execution_id = ?")
      .bind(m1.executionId)
      .first();
    expect(dead).toEqual({ execution_id: m1.executionId });
  });
});

describe("PATCH", () => {
  it("PATCH of the schedule before its occurrence: the new schedule starts from its next occurrence, the old one's never fires", async () => {
    const c = await create({ cron: "* * * * *" });
    const oldId = occurrenceId(c.job.id, c.firstAt);
    const now = Date.now();

    const res = await patch(c.job.id, { cron: "30 * * * * *" }); // every minute at second 30
    expect(res.status).toBe(200);
    const next = minuteAtOrAfter(now - 30_000) + 30_000; // the first second-30 at or after now
    expect(await res.json()).toMatchObject({
      status: "active",
      schedule: { cron: "30 * * * * *" },
      nextRunAt: new Date(next).toISOString(),
    });
    expect(await jobRow(c.job.id)).toMatchObject({ version: 2, synced: 1, next_run_at: next });
    expect(await scheduleOf(c)).toEqual({ version: 2, status: "active", next_at: next, fired: 0 });

    // the new schedule goes on: its occurrence fires, the one after it is 60 s later, at :30
    const idNext = occurrenceId(c.job.id, next);
    await deliver([await fireOccurrence(c, next)]);
    expect(await scheduleOf(c)).toMatchObject({ next_at: next + MINUTE, fired: 1 });
    // the old schedule's first occurrence time passes: nothing
    clock.travelTo(Math.max(c.firstAt, clock.at));
    await runAlarm(c.stub);
    expect(sentOf(oldId)).toEqual([]);
    expect(sentFor(c).map((m) => m.executionId)).toEqual([idNext]);
    expect((await received(c.path)).map((r) => r.headers["webhook-id"])).toEqual([idNext]);
    await clock.flush(c.stub);
    expect((await history(c.job.id)).map((r) => [r.id, r.status, r.occurrence])).toEqual([[idNext, "succeeded", 1]]);
    expect(await jobRow(c.job.id)).toMatchObject({ next_run_at: next + MINUTE, fired: 1 });
  });

  it("PATCH of the schedule cancels what was scheduled under the old one (an occurrence waiting for its retry)", async () => {
    const c = await create({ cron: "* * * * *", retry: { initialDelayMs: 30_000, jitter: 0 } }, "flaky/1");
    const id1 = occurrenceId(c.job.id, c.firstAt);
    await deliver([await fireOccurrence(c, c.firstAt)]); // 503: retry in 30 s
    expect(await heldOf(c)).toEqual([[id1, "scheduled", 1]]);

    const now = Date.now();
    expect((await patch(c.job.id, { cron: "30 * * * * *" })).status).toBe(200);
    const next = minuteAtOrAfter(now - 30_000) + 30_000;
    const [old] = await liveOf(c);
    expect(old).toMatchObject({ executionId: id1, status: "canceled", lastError: "rescheduled", attempts: 1 });
    expect(await scheduleOf(c)).toEqual({ version: 2, status: "active", next_at: next, fired: 1 });

    // the retry's time passes: nothing is sent for the old occurrence; the new schedule fires
    const idNext = occurrenceId(c.job.id, next);
    await deliver([await fireOccurrence(c, next)]);
    clock.advance(60_000);
    await runAlarm(c.stub);
    expect(sentOf(id1)).toHaveLength(1);
    expect((await received(c.path)).map((r) => r.headers["webhook-id"])).toEqual([id1, idNext]);
    await clock.flush(c.stub);
    expect((await history(c.job.id)).map((r) => [r.id, r.status, r.occurrence, r.attempts])).toEqual([
      [id1, "canceled", 1, 1],
      [idNext, "succeeded", 2, 1],
    ]);
  });

  it("PATCH of the schedule before any occurrence fired keeps the whole maxOccurrences budget", async () => {
    const c = await create({ cron: "* * * * *", maxOccurrences: 2 });
    expect((await patch(c.job.id, { cron: "30 * * * * *" })).status).toBe(200);
    const first = (await scheduleOf(c))!.next_at!;
    expect(new Date(first).getUTCSeconds()).toBe(30);

    // nothing has fired yet: the new schedule's first occurrence is 1 of 2, so a second is planned
    await deliver([await fireOccurrence(c, first)]);
    expect(await scheduleOf(c)).toMatchObject({ next_at: first + MINUTE, fired: 1 });
    await deliver([await fireOccurrence(c, first + MINUTE)]);
    expect(await scheduleOf(c)).toMatchObject({ next_at: null, fired: 2 });
    expect(sentFor(c).map((m) => m.dueAt)).toEqual([first, first + MINUTE]);
  });

  it("PATCH of only the target keeps the schedule; the occurrence's delivery goes to the new URL", async () => {
    const c = await create({ cron: "* * * * *" });
    const id1 = occurrenceId(c.job.id, c.firstAt);
    const newPath = uniquePath();

    const res = await patch(c.job.id, { target: { url: `${receiverUrl()}${newPath}` } });
    expect(res.status).toBe(200);
    expect(((await res.json()) as JobJson).target.url).toBe(`${receiverUrl()}${newPath}`);
    expect(await scheduleOf(c)).toEqual({ version: 2, status: "active", next_at: c.firstAt, fired: 0 });

    await deliver([await fireOccurrence(c, c.firstAt)]);
    expect((await received(newPath)).map((r) => r.headers["webhook-id"])).toEqual([id1]);
    expect(await received(c.path)).toEqual([]);
    const spec = JSON.parse((await jobRow(c.job.id))!.spec as string) as JobSpec;
    expect(spec.target).toMatchObject({ url: `${receiverUrl()}${newPath}` });
  });

  it("PATCH of a one-off job's runAt moves its execution (same id): nothing at the old time, one delivery at the new one", async () => {
    const c = await create({ delay: "1m" });
    const oldAt = c.firstAt;
    const newAt = Date.now() + 2 * MINUTE;
    const exeId = oneOffExecutionId(c.job.id);
    expect(await live(c.stub, exeId)).toMatchObject({ status: "scheduled", dueAt: oldAt });

    const res = await patch(c.job.id, { runAt: new Date(newAt).toISOString() });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ status: "active", nextRunAt: new Date(newAt).toISOString() });
    expect(await live(c.stub, exeId)).toMatchObject({ status: "scheduled", dueAt: newAt });

    clock.travelTo(Math.max(oldAt, clock.at));
    await runAlarm(c.stub);
    expect(sentOf(exeId)).toEqual([]);
    clock.travelTo(newAt);
    expect(await runDurableObjectAlarm(c.stub)).toBe(true);
    expect(sentOf(exeId).map((m) => m.dueAt)).toEqual([newAt]);
    await deliver(sentOf(exeId));
    expect((await received(c.path)).map((r) => r.headers["webhook-id"])).toEqual([exeId]);
    await clock.flush(c.stub);
    expect(await jobRow(c.job.id)).toMatchObject({ status: "completed", run_status: "succeeded", attempts: 1, next_run_at: newAt });
  });
});

describe("PATCH of a job stored under older rules", () => {
  it("keeps a header the rules of its day allowed, and a time zone stored in another case is the same schedule (no reschedule)", async () => {
    const c = await create({ cron: "* * * * *", timezone: "Europe/Berlin", retry: { initialDelayMs: 30_000, jitter: 0 } }, "fail/503");
    // as written before: a header now reserved, the zone in lower case
    const row = (await jobRow(c.job.id))!;
    const spec = JSON.parse(
      (await d1Of(c.job.id).prepare("SELECT spec FROM jobs WHERE id = ?").bind(c.job.id).first<{ spec: string }>())!.spec,
    ) as JobSpec;
    (spec.target as HttpTarget).headers["x-scheduler-trace"] = "legacy";
    spec.schedule!.timezone = "europe/berlin";
    await d1Of(c.job.id)
      .prepare("UPDATE jobs SET spec = ?, timezone = ?, version = version + 1, synced = 0 WHERE id = ?")
      .bind(JSON.stringify(spec), "europe/berlin", c.job.id)
      .run();
    await runScan();
    // an occurrence fails and waits for its retry
    const m = await fireOccurrence(c, c.firstAt);
    await deliver([m]);
    expect(await heldOf(c)).toEqual([[m.executionId, "scheduled", 1]]);

    const res = await patch(c.job.id, { name: "renamed" });
    expect(res.status, await res.clone().text()).toBe(200);
    const shownJob = (await res.json()) as JobJson & { schedule: { timezone: string } };
    expect([shownJob.name, shownJob.target.headers["x-scheduler-trace"], shownJob.schedule.timezone]).toEqual([
      "renamed",
      "legacy",
      "europe/berlin",
    ]);
    expect(await heldOf(c)).toEqual([[m.executionId, "scheduled", 1]]); // its retry still waits: not rescheduled
    expect(row.version).toBeLessThan((await jobRow(c.job.id))!.version);
    // a new reserved header is still refused
    expect((await patch(c.job.id, { target: { headers: { "x-scheduler-trace": "legacy", "webhook-new": "x" } } })).status).toBe(400);
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
    expect(await jobRow(recurring.job.id)).toMatchObject({ version: 1, next_run_at: recurring.firstAt });
    expect(await jobRow(oneOff.job.id)).toMatchObject({ version: 1, next_run_at: oneOff.firstAt });
    expect(await scheduleOf(recurring)).toEqual({ version: 1, status: "active", next_at: recurring.firstAt, fired: 0 });
    expect(await live(oneOff.stub, oneOffExecutionId(oneOff.job.id))).toMatchObject({ status: "scheduled", dueAt: oneOff.firstAt });
  });

  it("GET /v1/jobs/:id lists the next five occurrences in nextRuns, in the job's time zone", async () => {
    // 09:00 in Kolkata (UTC+05:30, no daylight saving) is 03:30Z every day
    const daily = await create({ cron: "0 9 * * *", timezone: "Asia/Kolkata" });
    const job = (await shown(daily.job.id)) as Awaited<ReturnType<typeof shown>> & {
      schedule: { cron: string; timezone: string; catchUp: string };
    };
    expect(job.schedule).toMatchObject({ cron: "0 9 * * *", timezone: "Asia/Kolkata", catchUp: "one" });
    expect(job.nextRuns).toHaveLength(5);
    expect(job.nextRuns[0]).toBe(job.nextRunAt);
    const runs = job.nextRuns.map(Date.parse);
    expect(Date.parse(job.nextRunAt!)).toBe(daily.firstAt);
    expect(runs[0]).toBeGreaterThanOrEqual(Date.now());
    expect(runs[0]! - Date.now()).toBeLessThanOrEqual(DAY);
    for (const [i, at] of runs.entries()) {
      expect(new Date(at).toISOString().slice(11)).toBe("03:30:00.000Z");
      if (i > 0) expect(at - runs[i - 1]!).toBe(DAY);
    }

    // seconds field: every 15 s
    const quick = await create({ cron: "*/15 * * * * *" });
    const qRuns = (await shown(quick.job.id)).nextRuns.map(Date.parse);
    expect(qRuns[0]).toBe(Math.ceil(Date.now() / 15_000) * 15_000);
    expect(qRuns.slice(1).map((at, i) => at - qRuns[i]!)).toEqual([15_000, 15_000, 15_000, 15_000]);
  });

  it("through daylight saving: skipped local times fire once at the transition, a repeated one once at its first instant (nextRuns from the API)", async () => {
    // Europe/Berlin springs forward 2027-03-28 02:00 CET -> 03:00 CEST and falls back 2027-10-31 03:00 CEST -> 02:00 CET
    const spring = await create({ cron: "*/30 2 * * *", timezone: "Europe/Berlin", startAt: "2027-03-27T12:00:00+01:00" });
    expect((await shown(spring.job.id)).nextRuns.slice(0, 3)).toEqual([
      "2027-03-28T01:00:00.000Z", // 02:00 and 02:30 do not exist that day: one firing at 03:00 CEST
      "2027-03-29T00:00:00.000Z", // 02:00 CEST
      "2027-03-29T00:30:00.000Z",
    ]);
    const fall = await create({ cron: "0 * * * *", timezone: "Europe/Berlin", startAt: "2027-10-31T01:30:00+02:00" });
    expect((await shown(fall.job.id)).nextRuns.slice(0, 3)).toEqual([
      "2027-10-31T00:00:00.000Z", // 02:00 CEST
      "2027-10-31T02:00:00.000Z", // 03:00 CET: the repeated 02:00 (CET, 01:00Z) does not fire again
      "2027-10-31T03:00:00.000Z",
    ]);
  });

  it("matches a time zone case-insensitively and shows its IANA spelling; keeps a link name as sent; refuses an offset", async () => {
    const berlin = await create({ cron: "0 9 * * *", timezone: "europe/berlin" });
    expect(((await shown(berlin.job.id)) as unknown as { schedule: { timezone: string } }).schedule.timezone).toBe("Europe/Berlin");
    expect((await patch(berlin.job.id, { timezone: "america/new_york" })).status).toBe(200);
    expect(((await shown(berlin.job.id)) as unknown as { schedule: { timezone: string } }).schedule.timezone).toBe("America/New_York");
    const kolkata = await create({ cron: "0 9 * * *", timezone: "Asia/Kolkata" });
    expect(((await shown(kolkata.job.id)) as unknown as { schedule: { timezone: string } }).schedule.timezone).toBe("Asia/Kolkata");
    const res = await api("/v1/jobs", {
      method: "POST",
      body: { target: { url: `${receiverUrl()}/ok` }, cron: "0 9 * * *", timezone: "+05:30" },
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { field: string } }).error.field).toBe("timezone");
  });
});

describe("catch-up after downtime", () => {
  it("one (default): after an hour down, the missed window fires once and the next occurrence is after now, not a storm", async () => {
    const c = await create({ cron: "* * * * *" });
    const id1 = occurrenceId(c.job.id, c.firstAt);

    clock.travelTo(c.firstAt + HOUR + 15_000); // the stack was down for an hour
    const now = Date.now();
    expect(await runDurableObjectAlarm(c.stub)).toBe(true);
    await runAlarm(c.stub); // and the alarm runs once more: still no storm
    const next = minuteAfter(now);
    expect(next).toBeGreaterThan(now);
    expect(await heldOf(c)).toEqual([[id1, "dispatched", 1]]);
    expect(await scheduleOf(c)).toMatchObject({ next_at: next, fired: 1 });
    expect(sentFor(c).map((m) => m.executionId)).toEqual([id1]);
    await deliver(sentFor(c));
    expect(await received(c.path)).toHaveLength(1);
    await clock.flush(c.stub);
    expect(await jobRow(c.job.id)).toMatchObject({ status: "active", next_run_at: next, fired: 1 });
  });

  it("none: after an hour down, the missed occurrence is canceled (skipped) and the next one is after now", async () => {
    const c = await create({ cron: "* * * * *", catchUp: "none" });
    const id1 = occurrenceId(c.job.id, c.firstAt);

    clock.travelTo(c.firstAt + HOUR + 15_000);
    const now = Date.now();
    expect(await runDurableObjectAlarm(c.stub)).toBe(true);
    const next = minuteAfter(now);
    expect(sentFor(c)).toEqual([]);
    expect(await scheduleOf(c)).toMatchObject({ status: "active", next_at: next });
    await clock.flush(c.stub);
    expect(await history(c.job.id)).toEqual([
      {
        id: id1,
        status: "canceled",
        due_at: c.firstAt,
        occurrence: 1,
        attempts: 0,
        last_http_status: null,
        last_error: "skipped: missed occurrence (catchUp none)",
        dead_reason: null,
      },
    ]);
    expect(await jobRow(c.job.id)).toMatchObject({ status: "active", next_run_at: next });

    // the schedule goes on from now
    await deliver([await fireOccurrence(c, next)]);
    expect((await received(c.path)).map((r) => r.headers["webhook-id"])).toEqual([occurrenceId(c.job.id, next)]);
  });

  it("none: when the skipped occurrence was the schedule's last, the job still completes (no occurrence is left to fire)", async () => {
    const c = await create({ cron: "* * * * *", catchUp: "none", maxOccurrences: 1 });
    clock.travelTo(c.firstAt + HOUR + 15_000);
    expect(await runDurableObjectAlarm(c.stub)).toBe(true);
    expect(sentFor(c)).toEqual([]);
    expect(await scheduleOf(c)).toMatchObject({ next_at: null, fired: 1 });
    await clock.flush(c.stub);
    expect((await history(c.job.id)).map((r) => r.status)).toEqual(["canceled"]);
    expect(await shown(c.job.id)).toMatchObject({ status: "completed", nextRunAt: null });
  });

  it("all: after 5 minutes down every missed occurrence fires, one execution each, then the schedule continues after now", async () => {
    const c = await create({ cron: "* * * * *", catchUp: "all" });
    clock.travelTo(c.firstAt + 5 * MINUTE + 15_000);
    const now = Date.now();
    for (let run = 0; run < 10; run++) await runAlarm(c.stub);

    const missed = Array.from({ length: 6 }, (_, i) => c.firstAt + i * MINUTE);
    expect(sentFor(c).map((m) => m.dueAt)).toEqual(missed);
    expect(sentFor(c).map((m) => m.executionId)).toEqual(missed.map((at) => occurrenceId(c.job.id, at)));
    expect(await scheduleOf(c)).toMatchObject({ next_at: minuteAfter(now), fired: 6 });
  });

  it("all is bounded: after 3 hours down only the 100 most recent missed occurrences fire (plus the one that was due)", async () => {
    const c = await create({ cron: "* * * * *", catchUp: "all" });
    clock.travelTo(c.firstAt + 3 * HOUR + 15_000);
    const now = Date.now();
    // the bucket sends only what its dispatch window has room for: claiming what was sent makes room
    for (let run = 0, claimed = 0; run < 150; run++) {
      await runAlarm(c.stub);
      const fresh = sentFor(c).slice(claimed);
      claimed += fresh.length;
      await c.stub.claim(fresh.map((m) => ({ executionId: m.executionId, dueAt: m.dueAt })));
      if (((await scheduleOf(c))?.next_at ?? 0) > now && fresh.length === 0) break;
    }
    const lastMissed = minuteAfter(now) - MINUTE;
    expect(sentFor(c).map((m) => m.dueAt)).toEqual([c.firstAt, ...Array.from({ length: 100 }, (_, i) => lastMissed - (99 - i) * MINUTE)]);
    expect(await scheduleOf(c)).toMatchObject({ next_at: minuteAfter(now), fired: 101 });
  });
});

describe("the two layers: a recurring job lives in its bucket from create; a far one-off waits in D1", () => {
  it("heals a recurring job whose hand-off failed at create: the sync pass hands it over (once) when its next occurrence is within the lookahead", async () => {
    const getByName = vi.spyOn(env.BUCKET, "getByName").mockImplementationOnce(() => {
      throw new Error("bucket unreachable");
    });
    let c: Created;
    try {
      c = await create({ cron: "* * * * *" });
    } finally {
      getByName.mockRestore();
    }
    // durable in D1, unknown to its bucket
    expect(await jobRow(c.job.id)).toMatchObject({ status: "active", version: 1, next_run_at: c.firstAt });
    expect(await scheduleOf(c)).toBeUndefined();

    await runScan();
    await Promise.all([runScan(), runScan()]);
    expect(await scheduleOf(c)).toEqual({ version: 1, status: "active", next_at: c.firstAt, fired: 0 });
    const m1 = await fireOccurrence(c, c.firstAt);
    await runScan(); // D1 has not learned of the firing yet: the sync pass makes nothing twice
    await runAlarm(c.stub);
    expect(sentFor(c)).toEqual([m1]);
    await deliver([m1]);
    expect(await received(c.path)).toHaveLength(1);
  });

  it("hands a recurring job to its bucket at create even when its next occurrence is a day away; the alarm is armed for it and fires it, once", async () => {
    // a daily schedule whose first occurrence is about 20 hours away
    const nextAt = minuteAtOrAfter(Date.now() + 20 * HOUR);
    const at = new Date(nextAt);
    const c = await create({ cron: `${at.getUTCMinutes()} ${at.getUTCHours()} * * *` });
    expect(c.firstAt).toBe(nextAt);
    expect(await jobRow(c.job.id)).toMatchObject({ version: 1, synced: 1, next_run_at: nextAt });
    expect(await scheduleOf(c)).toEqual({ version: 1, status: "active", next_at: nextAt, fired: 0 });
    expect(await liveOf(c)).toEqual([]);

    // the alarm is armed in time for it; nothing fires early
    const armed = await alarmOf(c.stub);
    expect(armed).not.toBeNull();
    expect(armed!).toBeLessThanOrEqual(quantized(nextAt));
    clock.travelTo(nextAt - HOUR);
    await runAlarm(c.stub);
    expect(sentFor(c)).toEqual([]);
    expect(await alarmOf(c.stub)).toBeLessThanOrEqual(quantized(nextAt));

    // the sync pass once it is within the lookahead: the bucket already holds it, nothing changes
    clock.travelTo(nextAt - LOOKAHEAD_MS / 2);
    await runScan();
    expect(await scheduleOf(c)).toEqual({ version: 1, status: "active", next_at: nextAt, fired: 0 });
    expect(await alarmOf(c.stub)).toBeLessThanOrEqual(quantized(nextAt));

    // it fires by the alarm, once; the next is a day later, in the bucket and (after the flush) in D1
    const id = occurrenceId(c.job.id, nextAt);
    await deliver([await fireOccurrence(c, nextAt)]);
    expect(await scheduleOf(c)).toMatchObject({ next_at: nextAt + DAY, fired: 1 });
    await clock.flush(c.stub);
    expect(await jobRow(c.job.id)).toMatchObject({ next_run_at: nextAt + DAY, fired: 1 });
    expect((await history(c.job.id)).map((r) => [r.id, r.status])).toEqual([[id, "succeeded"]]);
    expect((await received(c.path)).map((r) => r.headers["webhook-id"])).toEqual([id]);
    expect(await alarmOf(c.stub)).toBeLessThanOrEqual(quantized(nextAt + DAY));
  });

  it("an idle bucket's alarm settles on its next occurrence: it does not wake itself up every few seconds to count its own alarms", async () => {
    // a daily schedule an hour and a half away: nothing else for its bucket to do meanwhile
    const nextAt = minuteAtOrAfter(Date.now() + 90 * MINUTE);
    const at = new Date(nextAt);
    const c = await create({ cron: `${at.getUTCMinutes()} ${at.getUTCHours()} * * *` });
    expect(await scheduleOf(c)).toMatchObject({ next_at: nextAt });
    // run the alarm whenever it is armed before the occurrence: the bucket's pending work (the
    // flush of the schedule, counters, other tests' leftovers) is done within a few runs
    const wakeups: number[] = [];
    for (let i = 0; i < 30; i++) {
      const alarm = await alarmOf(c.stub);
      if (alarm === null || alarm >= quantized(nextAt)) break;
      wakeups.push(alarm - clock.at);
      clock.travelTo(Math.max(alarm, clock.at));
      await runDurableObjectAlarm(c.stub);
    }
    expect(wakeups.length, `alarm runs before the occurrence (ms ahead of the clock): ${wakeups.join(", ")}`).toBeLessThan(10);
    expect(await alarmOf(c.stub)).toBe(quantized(nextAt));
    expect(sentFor(c)).toEqual([]);
  });

  it("keeps a one-off due in 30 days only in D1 until the lookahead reaches it; then the sync pass hands it over once and it fires by the alarm", async () => {
    const dueAt = Date.now() + 30 * DAY;
    const c = await create({ runAt: new Date(dueAt).toISOString() });
    const exeId = oneOffExecutionId(c.job.id);
    expect(await jobRow(c.job.id)).toMatchObject({ status: "active", next_run_at: dueAt, run_status: null });
    expect(await live(c.stub, exeId)).toBeUndefined();

    // sync passes before the lookahead reaches it leave it in D1
    await runScan();
    clock.travelTo(dueAt - LOOKAHEAD_MS - MINUTE);
    await runScan();
    expect(await live(c.stub, exeId)).toBeUndefined();

    // the lookahead reaches it: handed to its bucket once, however many passes run
    clock.travelTo(dueAt - LOOKAHEAD_MS + MINUTE);
    const before = await counters();
    await Promise.all([runScan(), runScan()]);
    await runScan();
    expect((await counters()).scanner_recovered_total! - before.scanner_recovered_total!).toBe(1);
    expect(await live(c.stub, exeId)).toMatchObject({ status: "scheduled", dueAt });
    expect(await alarmOf(c.stub)).toBeLessThanOrEqual(quantized(dueAt));

    // and it fires by the alarm, once
    clock.travelTo(dueAt);
    expect(await runDurableObjectAlarm(c.stub)).toBe(true);
    expect(sentOf(exeId).map((m) => m.dueAt)).toEqual([dueAt]);
    await deliver(sentOf(exeId));
    expect((await received(c.path)).map((r) => r.headers["webhook-id"])).toEqual([exeId]);
    await clock.flush(c.stub);
    expect(await jobRow(c.job.id)).toMatchObject({ status: "completed", run_status: "succeeded", attempts: 1 });
  });
});
