/**
 * Retention inside workerd (issue 4, "bucket storage stays bounded"). Proves:
 * - D1 history: the scanner's purge removes terminal executions (succeeded, dead, canceled) that
 *   finished before now - HISTORY_RETENTION_MS, with their attempts, and nothing else: never a
 *   pending, scheduled, dispatched or running row however old, never a recent terminal one;
 *   a finished (completed or canceled) job's record goes once none of its history is left;
 *   idempotency keys older than IDEMPOTENCY_WINDOW_MS go too, younger ones still replay (invariant 8);
 *   a purge of old history must not reset a recurring job's occurrence count (maxOccurrences).
 * - Bucket storage: a terminal row leaves its bucket on the alarm once it is mirrored (dirty = 0)
 *   and older than TERMINAL_RETENTION_MS, with its attempts; D1 keeps its history. A row not yet
 *   mirrored, a younger one, or any non-terminal row stays (invariant 4: nothing is lost).
 *
 * Time: as in recurring.test.ts, Date.now() is frozen for this file at a virtual time
 * HEAD_START_MS ahead of the real clock and moves only forward, when a test travels; the
 * Worker and its Durable Objects read the same clock, and no bucket alarm fires on its own while
 * the file runs. helpers.withClockAhead / flushMirror must not be used here (they spy on Date.now).
 */
import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, onTestFinished } from "vitest";
import { bucketOf, timeBucketOf } from "../../src/core/bucketing";
import { newId, occurrenceId } from "../../src/core/id";
import type { FireMessage } from "../../src/env";
import {
  api,
  bucketSql,
  bucketStub,
  captureFires,
  createJob,
  fileClock,
  fire,
  fireMessage,
  type JobJson,
  received,
  receiverUrl,
  runScan,
  uniquePath,
} from "./helpers";

const HEAD_START_MS = 10 * 60_000;
const MINUTE = 60_000;
const DAY = 86_400_000;
const BUCKETS = Number(env.BUCKETS);
const SCAN_WINDOW_MS = Number(env.SCAN_WINDOW_MS ?? 60_000);
const MIRROR_DELAY_MS = Number(env.MIRROR_DELAY_MS ?? 1_000);
const TERMINAL_RETENTION_MS = Number(env.TERMINAL_RETENTION_MS ?? 3_600_000);
const HISTORY_RETENTION_MS = Number(env.HISTORY_RETENTION_MS ?? 30 * DAY);
const IDEMPOTENCY_WINDOW_MS = Number(env.IDEMPOTENCY_WINDOW_MS ?? DAY);

// ---------------------------------------------------------------------------------------------
// the file's clock

const clock = fileClock(HEAD_START_MS);
const { travelTo, advance, flush } = clock;

// ---------------------------------------------------------------------------------------------
// helpers of this file

type Stub = ReturnType<typeof bucketStub>;

async function deliver(messages: FireMessage[]): Promise<void> {
  const result = await fire(messages);
  expect(result.explicitAcks).toEqual(messages.map((_, i) => `m${i}`));
}

interface Fired {
  job: JobJson;
  executionId: string;
  bucket: number;
  stub: Stub;
  path: string;
  dueAt: number;
}

/** Creates a job and cancels it when the test ends (a 409 once it completed is fine). */
async function create(fields: Record<string, unknown>, kind = "ok"): Promise<Omit<Fired, "executionId" | "dueAt"> & { firstAt: number }> {
  const path = uniquePath(kind);
  const job = await createJob({ target: { url: `${receiverUrl()}${path}` }, ...fields });
  onTestFinished(async () => {
    await api(`/v1/jobs/${job.id}`, { method: "DELETE" });
  });
  const row = (await env.DB.prepare("SELECT bucket, due_at FROM executions WHERE job_id = ? ORDER BY due_at LIMIT 1")
    .bind(job.id)
    .first<{ bucket: number; due_at: number }>())!;
  return { job, bucket: row.bucket, stub: bucketStub(row.bucket), path, firstAt: row.due_at };
}

/** A one-off job due in a minute, moved to its due time and dispatched by the alarm (message captured). */
async function dispatched(fires: { messages: FireMessage[] }, fields: Record<string, unknown> = {}, kind = "ok"): Promise<Fired & { message: FireMessage }> {
  const c = await create({ delay: "1m", ...fields }, kind);
  const executionId = occurrenceId(c.job.id, c.firstAt);
  travelTo(Math.max(c.firstAt, clock.at));
  await runDurableObjectAlarm(c.stub);
  const message = fires.messages.find((m) => m.executionId === executionId);
  if (!message) throw new Error("the alarm sent nothing for the job");
  return { ...c, executionId, dueAt: c.firstAt, message };
}

/** A one-off job fired and succeeded in its bucket (not mirrored yet). */
async function succeeded(fires: { messages: FireMessage[] }): Promise<Fired> {
  const d = await dispatched(fires);
  await deliver([d.message]);
  expect(await bucketExecution(d.stub, d.executionId)).toMatchObject({ status: "succeeded" });
  return d;
}

interface Row {
  id: string;
  status: string;
  finished_at: number | null;
  dirty: number;
}

async function bucketExecution(stub: Stub, id: string): Promise<Row | undefined> {
  return (await bucketSql<Row>(stub, "SELECT id, status, finished_at, dirty FROM executions WHERE id = ?", id))[0];
}

async function bucketAttemptCount(stub: Stub, id: string): Promise<number> {
  return (await bucketSql<{ n: number }>(stub, "SELECT count(*) AS n FROM attempts WHERE execution_id = ?", id))[0]!.n;
}

// ---------------------------------------------------------------------------------------------

describe("D1 history retention (the scanner's purge)", () => {
  it("removes only terminal executions that finished before HISTORY_RETENTION_MS, with their attempts; never live rows however old, never recent terminal ones", async () => {
    const now = Date.now();
    const cutoff = now - HISTORY_RETENTION_MS;
    const longAgo = now - 2 * HISTORY_RETENTION_MS;
    const random = () => crypto.getRandomValues(new Uint8Array(16));
    const jobId = newId("job", longAgo, random());
    const bucket = bucketOf(jobId, BUCKETS);
    // a paused job: the scan hands none of its pending rows over, so every row stays as written here
    const rows: { name: string; status: string; finishedAt: number | null; purged: boolean }[] = [
      { name: "old succeeded", status: "succeeded", finishedAt: cutoff - MINUTE, purged: true },
      { name: "old dead", status: "dead", finishedAt: cutoff - DAY, purged: true },
      { name: "old canceled", status: "canceled", finishedAt: cutoff - 1, purged: true },
      { name: "recent succeeded", status: "succeeded", finishedAt: cutoff + MINUTE, purged: false },
      { name: "recent dead", status: "dead", finishedAt: cutoff + MINUTE, purged: false },
      { name: "recent canceled", status: "canceled", finishedAt: now, purged: false },
      { name: "old pending", status: "pending", finishedAt: null, purged: false },
      { name: "old scheduled", status: "scheduled", finishedAt: null, purged: false },
      { name: "old dispatched", status: "dispatched", finishedAt: null, purged: false },
      { name: "old running", status: "running", finishedAt: null, purged: false },
    ];
    const ids = rows.map((_, i) => occurrenceId(jobId, longAgo + i * MINUTE));
    const spec = { target: { url: `${receiverUrl()}${uniquePath()}`, method: "POST", headers: {}, body: null }, timeoutMs: 30_000, retry: {}, metadata: null, schedule: null };
    await env.DB.batch([
      env.DB.prepare(
        `INSERT INTO jobs (id, tenant, name, status, bucket, spec, cron, next_run_at, created_at, updated_at)
         VALUES (?, 'acme', 'retention', 'paused', ?, ?, '* * * * *', NULL, ?, ?)`,
      ).bind(jobId, bucket, JSON.stringify(spec), longAgo, longAgo),
      ...rows.map((r, i) =>
        env.DB.prepare(
          `INSERT INTO executions (id, job_id, tenant, bucket, time_bucket, due_at, status, attempts, finished_at, occurrence, created_at, updated_at)
           VALUES (?, ?, 'acme', ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        ).bind(ids[i]!, jobId, bucket, timeBucketOf(longAgo + i * MINUTE, SCAN_WINDOW_MS), longAgo + i * MINUTE, r.status,
          r.finishedAt === null ? 0 : 2, r.finishedAt, i + 1, longAgo, r.finishedAt ?? longAgo),
      ),
      // two attempts for every execution that ran
      ...rows.flatMap((r, i) =>
        r.finishedAt === null
          ? []
          : [1, 2].map((attempt) =>
              env.DB.prepare(
                `INSERT INTO attempts (execution_id, attempt, due_at, started_at, finished_at, outcome, http_status)
                 VALUES (?, ?, ?, ?, ?, ?, ?)`,
              ).bind(ids[i]!, attempt, longAgo, longAgo, r.finishedAt, attempt === 2 ? "succeeded" : "retryable", attempt === 2 ? 200 : 503),
            ),
      ),
    ]);

    await runScan();

    const { results: left } = await env.DB.prepare("SELECT id, status FROM executions WHERE job_id = ? ORDER BY due_at").bind(jobId).all<{ id: string; status: string }>();
    const expected = rows.flatMap((r, i) => (r.purged ? [] : [{ id: ids[i]!, status: r.status }]));
    expect(left).toEqual(expected);
    for (const [i, r] of rows.entries()) {
      const { results: attempts } = await env.DB.prepare("SELECT attempt FROM attempts WHERE execution_id = ?").bind(ids[i]!).all();
      expect(attempts, r.name).toHaveLength(r.purged || r.finishedAt === null ? 0 : 2);
    }
    // the job's record stays
    expect(await env.DB.prepare("SELECT status FROM jobs WHERE id = ?").bind(jobId).first()).toEqual({ status: "paused" });
  });

  it("removes a finished job's record once its history is gone and it is older than the retention; never an active or paused one, never one with executions left", async () => {
    const now = Date.now();
    const cutoff = now - HISTORY_RETENTION_MS;
    const longAgo = cutoff - DAY;
    const random = () => crypto.getRandomValues(new Uint8Array(16));
    const jobs = [
      { name: "completed, old history only", status: "completed", updatedAt: longAgo, execution: { status: "succeeded", finishedAt: longAgo }, kept: false },
      { name: "canceled, no executions", status: "canceled", updatedAt: longAgo, execution: null, kept: false },
      { name: "canceled, a recent execution", status: "canceled", updatedAt: longAgo, execution: { status: "canceled", finishedAt: cutoff + MINUTE }, kept: true },
      { name: "completed recently", status: "completed", updatedAt: cutoff + MINUTE, execution: null, kept: true },
      { name: "active, no executions", status: "active", updatedAt: longAgo, execution: null, kept: true },
      { name: "paused, old history only", status: "paused", updatedAt: longAgo, execution: { status: "succeeded", finishedAt: longAgo }, kept: true },
    ].map((j) => ({ ...j, id: newId("job", longAgo, random()) }));
    const spec = JSON.stringify({ target: { url: `${receiverUrl()}/ok`, method: "POST", headers: {}, body: null }, timeoutMs: 30_000, retry: {}, metadata: null, schedule: null });
    await env.DB.batch(
      jobs.flatMap((j) => [
        env.DB.prepare(
          `INSERT INTO jobs (id, tenant, name, status, bucket, spec, next_run_at, created_at, updated_at)
           VALUES (?, 'acme', ?, ?, ?, ?, NULL, ?, ?)`,
        ).bind(j.id, j.name, j.status, bucketOf(j.id, BUCKETS), spec, longAgo, j.updatedAt),
        ...(j.execution
          ? [
              env.DB.prepare(
                `INSERT INTO executions (id, job_id, tenant, bucket, time_bucket, due_at, status, attempts, finished_at, created_at, updated_at)
                 VALUES (?, ?, 'acme', ?, ?, ?, ?, 1, ?, ?, ?)`,
              ).bind(occurrenceId(j.id, longAgo), j.id, bucketOf(j.id, BUCKETS), timeBucketOf(longAgo, SCAN_WINDOW_MS), longAgo,
                j.execution.status, j.execution.finishedAt, longAgo, j.execution.finishedAt),
            ]
          : []),
      ]),
    );

    await runScan();

    for (const j of jobs) {
      const row = await env.DB.prepare("SELECT status FROM jobs WHERE id = ?").bind(j.id).first();
      expect(row, j.name).toEqual(j.kept ? { status: j.status } : null);
    }
  });

  it("purges idempotency keys older than IDEMPOTENCY_WINDOW_MS; a younger key still replays the original job (invariant 8)", async () => {
    captureFires();
    const url = `${receiverUrl()}${uniquePath()}`;
    const post = (key: string) => api("/v1/jobs", { method: "POST", body: { target: { url }, delay: "1h" }, headers: { "idempotency-key": key } });
    const [oldKey, youngKey] = [`old-${crypto.randomUUID()}`, `young-${crypto.randomUUID()}`];
    const first = await post(oldKey);
    expect(first.status).toBe(201);
    const original = (await first.json()) as JobJson;
    onTestFinished(async () => {
      await api(`/v1/jobs/${original.id}`, { method: "DELETE" });
    });

    travelTo(Date.now() + IDEMPOTENCY_WINDOW_MS + MINUTE);
    const young = await post(youngKey);
    expect(young.status).toBe(201);
    const youngJob = (await young.json()) as JobJson;
    onTestFinished(async () => {
      await api(`/v1/jobs/${youngJob.id}`, { method: "DELETE" });
    });

    await runScan();
    const { results: keys } = await env.DB.prepare("SELECT key FROM idempotency_keys WHERE key IN (?, ?)").bind(oldKey, youngKey).all();
    expect(keys).toEqual([{ key: youngKey }]);

    const replay = await post(youngKey);
    expect(replay.status).toBe(200);
    expect(((await replay.json()) as JobJson).id).toBe(youngJob.id);
    const fresh = await post(oldKey);
    expect(fresh.status).toBe(201);
    const freshJob = (await fresh.json()) as JobJson;
    onTestFinished(async () => {
      await api(`/v1/jobs/${freshJob.id}`, { method: "DELETE" });
    });
    expect(freshJob.id).not.toBe(original.id);
  });
});

describe("bucket storage stays bounded", () => {
  it("a mirrored terminal row leaves its bucket on the alarm once older than TERMINAL_RETENTION_MS, with its attempts; D1 keeps the history", async () => {
    const fires = captureFires();
    const s = await succeeded(fires);
    await flush(s.stub);
    const row = (await bucketExecution(s.stub, s.executionId))!;
    expect(row).toMatchObject({ status: "succeeded", dirty: 0 });
    expect(await bucketAttemptCount(s.stub, s.executionId)).toBe(1);

    // just younger than the retention: stays
    travelTo(row.finished_at! + TERMINAL_RETENTION_MS - 1_000);
    await runDurableObjectAlarm(s.stub);
    expect(await bucketExecution(s.stub, s.executionId)).toBeDefined();

    // older: the alarm (armed for it) removes the row, its attempts and the job's copy
    travelTo(row.finished_at! + TERMINAL_RETENTION_MS + 1);
    expect(await runDurableObjectAlarm(s.stub)).toBe(true);
    expect(await bucketExecution(s.stub, s.executionId)).toBeUndefined();
    expect(await bucketAttemptCount(s.stub, s.executionId)).toBe(0);
    expect(await bucketSql(s.stub, "SELECT id FROM jobs WHERE id = ?", s.job.id)).toEqual([]);

    // D1 is the record from now on
    const shown = (await (await api(`/v1/jobs/${s.job.id}/executions`)).json()) as {
      executions: { id: string; status: string; attempts: { attempt: number; outcome: string }[] }[];
    };
    expect(shown.executions).toEqual([
      expect.objectContaining({ id: s.executionId, status: "succeeded", attempts: [expect.objectContaining({ attempt: 1, outcome: "succeeded" })] }),
    ]);
    // past the duplicate-suppression horizon a late duplicate is still dropped: the bucket no longer knows it
    await deliver([fireMessage({ id: s.executionId, bucket: s.bucket })]);
    expect(await received(s.path)).toHaveLength(1);
  });

  it("keeps an old terminal row until it is mirrored: not mirrored it stays, and it leaves with the alarm that mirrors it", async () => {
    const fires = captureFires();
    const s = await succeeded(fires);
    await flush(s.stub); // a mirror has just run: the next one is MIRROR_DELAY_MS away

    // a change the mirror has not written yet, on a row finished long ago
    const old = Date.now() - TERMINAL_RETENTION_MS - MINUTE;
    await bucketSql(s.stub, "UPDATE executions SET dirty = 1, finished_at = ?, version = version + 1 WHERE id = ?", old, s.executionId);
    expect(await runDurableObjectAlarm(s.stub)).toBe(true);
    expect(await bucketExecution(s.stub, s.executionId)).toMatchObject({ status: "succeeded", dirty: 1 });
    expect(await bucketAttemptCount(s.stub, s.executionId)).toBe(1);

    // the next alarm mirrors it, and then it may go
    advance(MIRROR_DELAY_MS);
    expect(await runDurableObjectAlarm(s.stub)).toBe(true);
    expect(await bucketExecution(s.stub, s.executionId)).toBeUndefined();
    expect(await env.DB.prepare("SELECT status FROM executions WHERE id = ?").bind(s.executionId).first()).toEqual({ status: "succeeded" });
  });

  it("never removes a non-terminal row, however old (invariant 4)", async () => {
    const fires = captureFires();
    // all created at one instant: three due in a minute, one due later
    const waiting = await create({ delay: "170s" }); // scheduled, within the lookahead
    const sent = await create({ delay: "1m" }); // dispatched, never claimed
    const claimed = await create({ delay: "1m" }); // running
    const retrying = await create({ delay: "1m", retry: { initialDelayMs: 3_600_000, maxDelayMs: 3_600_000, jitter: 0 } }, "fail/500");
    travelTo(sent.firstAt);
    for (const stub of new Set([sent.stub, claimed.stub, retrying.stub])) expect(await runDurableObjectAlarm(stub)).toBe(true);
    const idOf = (c: { job: JobJson; firstAt: number }) => occurrenceId(c.job.id, c.firstAt);
    const [lease] = await claimed.stub.claim([idOf(claimed)]);
    expect(lease).toMatchObject({ ok: true });
    await deliver(fires.messages.filter((m) => m.executionId === idOf(retrying))); // a 500: back off, scheduled again
    const live = [
      { stub: waiting.stub, id: idOf(waiting), status: "scheduled" },
      { stub: sent.stub, id: idOf(sent), status: "dispatched" },
      { stub: claimed.stub, id: idOf(claimed), status: "running" },
      { stub: retrying.stub, id: idOf(retrying), status: "scheduled" },
    ];
    // as old as can be, and mirrored
    for (const l of live) {
      await bucketSql(l.stub, "UPDATE executions SET finished_at = 0, dirty = 0 WHERE id = ?", l.id);
      await bucketSql(l.stub, "UPDATE attempts SET finished_at = 0, dirty = 0 WHERE execution_id = ?", l.id);
    }
    for (const stub of new Set(live.map((l) => l.stub))) await runDurableObjectAlarm(stub);
    for (const l of live) expect(await bucketExecution(l.stub, l.id), l.status).toMatchObject({ status: l.status });
    expect(await bucketAttemptCount(retrying.stub, idOf(retrying))).toBe(1);
  });
});

describe("history retention and recurring jobs", () => {
  it("a purge of old history does not reset a recurring job's occurrence count: paused for a month, maxOccurrences 3 still fires 3 times in all", async () => {
    const fires = captureFires();
    const c = await create({ cron: "* * * * *", maxOccurrences: 3 });
    for (const at of [c.firstAt, c.firstAt + MINUTE]) {
      travelTo(at);
      expect(await runDurableObjectAlarm(c.stub)).toBe(true);
      await deliver(fires.messages.filter((m) => m.executionId === occurrenceId(c.job.id, at)));
    }
    expect((await api(`/v1/jobs/${c.job.id}/pause`, { method: "POST" })).status).toBe(200);
    await flush(c.stub);

    // paused for longer than the history retention: the scan purges the two that ran
    travelTo(Date.now() + HISTORY_RETENTION_MS + DAY);
    await runScan();
    const { results: history } = await env.DB.prepare("SELECT status FROM executions WHERE job_id = ? AND status = 'succeeded'").bind(c.job.id).all();
    expect(history).toEqual([]);

    // resumed: one occurrence is left, so the one it schedules is the last
    expect((await api(`/v1/jobs/${c.job.id}/resume`, { method: "POST" })).status).toBe(200);
    const { results: scheduled } = await env.DB.prepare("SELECT id, due_at, occurrence FROM executions WHERE job_id = ? AND status = 'scheduled'")
      .bind(c.job.id)
      .all<{ id: string; due_at: number; occurrence: number }>();
    expect(scheduled).toHaveLength(1);
    travelTo(scheduled[0]!.due_at);
    expect(await runDurableObjectAlarm(c.stub)).toBe(true);
    await deliver(fires.messages.filter((m) => m.executionId === scheduled[0]!.id));
    expect(await bucketSql(c.stub, "SELECT occurrence, status, last FROM executions WHERE job_id = ? ORDER BY occurrence_at", c.job.id)).toEqual([
      { occurrence: 3, status: "succeeded", last: 1 },
    ]);
  });
});
