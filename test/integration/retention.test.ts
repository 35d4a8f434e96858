/**
 * Retention inside workerd: storage stays bounded and nothing live is ever dropped.
 * - Bucket storage: an execution's row leaves its bucket with the flush that writes its outcome
 *   to D1 (succeeded, dead, canceled; a recurring occurrence too), and not before: a flush that
 *   fails keeps it. There is no terminal retention in the bucket anymore. A live execution
 *   (scheduled, dispatched, running, backing off) stays however long it waits (invariant 4).
 * - D1 history: the scan purges finished jobs' rows (a one-off job's row holds its outcome),
 *   occurrence history and dead letters older than HISTORY_RETENTION_MS, and idempotency keys
 *   older than IDEMPOTENCY_WINDOW_MS (invariant 8); never an active or paused job however old,
 *   never recent history, never a dead letter on its way to a redrive (invariant 4); page by
 *   page until caught up; without resetting a recurring job's occurrence count.
 *
 * Time: one file-wide virtual clock 10 minutes ahead of the real one, moved only forward by the
 * tests (no bucket alarm fires on its own); fire-queue sends are captured for the whole file and
 * fed to the consumer by the test. Storage is shared by the tests of this file: ids are unique.
 */
import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, onTestFinished } from "vitest";
import type { FireMessage } from "../../src/bucket/protocol";
import { bucketOfJob } from "../../src/core/bucketing";
import { newId, occurrenceId, oneOffExecutionId } from "../../src/core/id";
import {
  api,
  bucketRow,
  bucketSql,
  bucketStub,
  CONFIG,
  captureFiresForFile,
  countAll,
  createJob,
  d1Of,
  type Execution,
  fileClock,
  fire,
  fireMessage,
  idempotencyKeysStub,
  type JobJson,
  jobRow,
  keySql,
  live,
  newExecution,
  received,
  receiverUrl,
  runAlarm,
  runScan,
  spyOnD1,
  takeSent,
  uniquePath,
} from "./helpers";

const MINUTE = 60_000;
const DAY = 86_400_000;
const BUCKETS = CONFIG.BUCKETS;
const HISTORY_RETENTION_MS = CONFIG.HISTORY_RETENTION_MS;
const IDEMPOTENCY_WINDOW_MS = CONFIG.IDEMPOTENCY_WINDOW_MS;
/** the purge's page (src/scanner/scan.ts PURGE_PAGE), split over the buckets for jobs */
const PURGE_PAGE = 5000;

const clock = fileClock(10 * MINUTE);
const sent = captureFiresForFile();

type Stub = ReturnType<typeof bucketStub>;

const messagesOf = (executionId: string): FireMessage[] => takeSent(sent, executionId);

/** Feeds messages to the consumer; every one is acked. */
async function deliver(messages: FireMessage[]): Promise<void> {
  const result = await fire(messages);
  expect(result.explicitAcks).toEqual(messages.map((_, i) => `m${i}`));
  expect(result.retryMessages).toEqual([]);
}

/** Cancels a job when the test ends (a 409 once it completed is fine). */
function cancelAtEnd(jobId: string): void {
  onTestFinished(async () => {
    await api(`/v1/jobs/${jobId}`, { method: "DELETE" });
  });
}

/** A one-off job due in a minute whose target answers per `kind`. */
async function oneOff(kind = "ok", fields: Record<string, unknown> = {}): Promise<Execution & { path: string }> {
  const path = uniquePath(kind);
  const e = await newExecution({ target: { url: `${receiverUrl()}${path}` }, delay: "1m", ...fields });
  cancelAtEnd(e.job.id);
  return { ...e, path };
}

/** Travels to the latest due time of `executions` and runs their buckets' alarms: what they sent, by execution. */
async function dispatchAll(executions: Execution[]): Promise<Map<string, FireMessage[]>> {
  clock.travelTo(Math.max(clock.at, ...executions.map((e) => e.exe.due_at)));
  for (const stub of stubsOf(executions)) expect(await runDurableObjectAlarm(stub)).toBe(true);
  return new Map(executions.map((e) => [e.exe.id, messagesOf(e.exe.id)]));
}

function stubsOf(executions: { exe: { bucket: number } }[]): Stub[] {
  return [...new Set(executions.map((e) => e.exe.bucket))].map(bucketStub);
}

/** Writes every bucket's finished outcomes to D1. */
async function flushAll(): Promise<void> {
  for (let k = 0; k < BUCKETS; k++) await clock.flush(bucketStub(k));
}

/** A count over every shard (rows seeded with ids from before shards are shard 0's). */
async function count(query: string, ...args: unknown[]): Promise<number> {
  return countAll(query, ...args);
}

describe("bucket storage stays bounded", () => {
  it("a succeeded, a dead and a canceled execution leave their bucket with the flush that writes their outcome to D1, not before", async () => {
    const ok = await oneOff("ok");
    const dead = await oneOff("fail/400");
    const canceled = await oneOff("ok");
    expect((await api(`/v1/jobs/${canceled.job.id}`, { method: "DELETE" })).status).toBe(200);
    // canceled in the bucket, D1 not written yet: the row stays (its outcome exists only here)
    expect(await live(canceled.stub, canceled.exe.id)).toMatchObject({ status: "canceled" });
    expect(await bucketRow(canceled.stub, canceled.exe.id)).toBeDefined();
    expect(await jobRow(canceled.job.id)).toMatchObject({ status: "canceled", run_status: null });
    // the next alarm (the one that dispatches the others) flushes it
    const messages = await dispatchAll([ok, dead, canceled]);
    expect(messages.get(canceled.exe.id)).toEqual([]);
    await deliver([...messages.get(ok.exe.id)!, ...messages.get(dead.exe.id)!]);

    const cases = [
      { e: ok, status: "succeeded", job: "completed" },
      { e: dead, status: "dead", job: "completed" },
      { e: canceled, status: "canceled", job: "canceled" },
    ];
    for (const c of cases.slice(0, 2)) {
      expect(await live(c.e.stub, c.e.exe.id), c.status).toMatchObject({ status: c.status });
      expect(await bucketRow(c.e.stub, c.e.exe.id), c.status).toBeDefined();
      expect(await jobRow(c.e.job.id), c.status).toMatchObject({ run_status: null });
    }

    // the flush writes the outcomes and the rows leave at once: no retention period
    for (const stub of stubsOf(cases.map((c) => c.e))) await clock.flush(stub);
    for (const c of cases) {
      expect(await jobRow(c.e.job.id), c.status).toMatchObject({ status: c.job, run_status: c.status });
      expect(await bucketRow(c.e.stub, c.e.exe.id), c.status).toBeUndefined();
      expect(await live(c.e.stub, c.e.exe.id), c.status).toBeUndefined();
    }
    expect(await count("SELECT count(*) AS n FROM dead_letters WHERE execution_id = ?", dead.exe.id)).toBe(1);

    // D1 is the record from now on
    const shown = (await (await api(`/v1/jobs/${ok.job.id}/executions`)).json()) as {
      executions: { id: string; status: string; attempts: { attempt: number; outcome: string }[] }[];
    };
    expect(shown.executions).toEqual([
      expect.objectContaining({
        id: ok.exe.id,
        status: "succeeded",
        attempts: [expect.objectContaining({ attempt: 1, outcome: "succeeded" })],
      }),
    ]);
    // a late duplicate is still dropped, now and after the bucket forgot the id
    await deliver([fireMessage(ok.exe)]);
    clock.advance(5 * MINUTE);
    await deliver([fireMessage(ok.exe)]);
    expect(await received(ok.path)).toHaveLength(1);
    expect(await received(dead.path)).toHaveLength(1);
    expect(await received(canceled.path)).toEqual([]);
  });

  it("keeps a finished row in its bucket while D1 has not taken its outcome: a failed flush keeps it, the next one lets it go (invariant 4)", async () => {
    const e = await oneOff("ok");
    const messages = await dispatchAll([e]);
    await deliver(messages.get(e.exe.id)!);
    expect(await live(e.stub, e.exe.id)).toMatchObject({ status: "succeeded" });

    const failing = spyOnD1("batch").mockRejectedValueOnce(new Error("injected: D1 unavailable"));
    onTestFinished(() => failing.mockRestore());
    await clock.flush(e.stub);
    expect(failing).toHaveBeenCalled();
    failing.mockRestore();
    expect(await jobRow(e.job.id)).toMatchObject({ status: "active", run_status: null });
    expect(await bucketRow(e.stub, e.exe.id)).toBeDefined();
    expect(await live(e.stub, e.exe.id)).toMatchObject({ status: "succeeded", attempts: 1 });

    // the bucket retries the flush on its own alarm
    await clock.flush(e.stub);
    expect(await jobRow(e.job.id)).toMatchObject({ status: "completed", run_status: "succeeded", attempts: 1 });
    expect(await bucketRow(e.stub, e.exe.id)).toBeUndefined();
    expect(await received(e.path)).toHaveLength(1);
  });

  it("never removes a live execution from its bucket nor its job from D1, however long it waits (invariant 4)", async () => {
    const waiting = await oneOff("ok", { delay: "170s" }); // scheduled, within the lookahead
    const unclaimed = await oneOff("ok"); // dispatched, never claimed
    const claimed = await oneOff("ok"); // running (claimed here, never reported)
    const retrying = await oneOff("fail/500", { retry: { initialDelayMs: 3_600_000, maxDelayMs: 3_600_000, jitter: 0 } });
    const messages = await dispatchAll([unclaimed, claimed, retrying]);
    const [lease] = await claimed.stub.claim([{ executionId: claimed.exe.id, dueAt: claimed.exe.due_at }]);
    expect(lease).toMatchObject({ ok: true });
    await deliver(messages.get(retrying.exe.id)!); // a 500: backs off an hour
    const all = [
      { e: waiting, status: "scheduled" },
      { e: unclaimed, status: "dispatched" },
      { e: claimed, status: "running" },
      { e: retrying, status: "scheduled" },
    ];
    const check = async (when: string) => {
      for (const l of all) {
        expect(await bucketRow(l.e.stub, l.e.exe.id), `${when}: ${l.status}`).toBeDefined();
        expect(await jobRow(l.e.job.id), `${when}: ${l.status}`).toMatchObject({ status: "active", run_status: null });
      }
    };
    for (const stub of stubsOf(all.map((l) => l.e))) await clock.flush(stub);
    for (const l of all) expect(await live(l.e.stub, l.e.exe.id), l.status).toMatchObject({ status: l.status });
    await check("after a flush");

    // far past every retention: the scan's purge takes none of them
    clock.advance(HISTORY_RETENTION_MS + IDEMPOTENCY_WINDOW_MS + DAY);
    await runScan();
    await check("after the purge");
    for (const l of all) expect(await live(l.e.stub, l.e.exe.id), l.status).toMatchObject({ status: l.status });

    // the alarm moves them on (expired lease -> retry, lost dispatch -> again, due -> sent), never away
    for (const stub of stubsOf(all.map((l) => l.e))) await runAlarm(stub);
    await check("after the alarm");
    for (const l of all) {
      expect(["scheduled", "dispatched"], l.status).toContain((await live(l.e.stub, l.e.exe.id))!.status);
    }
    expect((await live(claimed.stub, claimed.exe.id))!.attemptLog).toEqual([
      expect.objectContaining({ attempt: 1, outcome: "lease_expired" }),
    ]);
  });
});

describe("D1 history retention (the scan's purge)", () => {
  it("purges finished jobs' rows, their dead letters and a recurring job's occurrences once older than HISTORY_RETENTION_MS, not before", async () => {
    const startedAt = clock.at;
    const ok = await oneOff("ok");
    const dead = await oneOff("fail/400");
    const canceled = await oneOff("ok");
    expect((await api(`/v1/jobs/${canceled.job.id}`, { method: "DELETE" })).status).toBe(200);
    const messages = await dispatchAll([ok, dead, canceled]);
    await deliver([...messages.get(ok.exe.id)!, ...messages.get(dead.exe.id)!]);

    // a recurring job: two occurrences, then canceled
    const cron = await createJob({ target: { url: `${receiverUrl()}${uniquePath()}` }, cron: "* * * * *" });
    cancelAtEnd(cron.id);
    const cronRow = (await jobRow(cron.id))!;
    const cronStub = bucketStub(cronRow.bucket);
    const occurrences: string[] = [];
    for (const at of [cronRow.next_run_at!, cronRow.next_run_at! + MINUTE]) {
      clock.travelTo(at);
      expect(await runDurableObjectAlarm(cronStub)).toBe(true);
      occurrences.push(occurrenceId(cron.id, at));
      await deliver(messagesOf(occurrenceId(cron.id, at)));
    }
    expect((await api(`/v1/jobs/${cron.id}`, { method: "DELETE" })).status).toBe(200);
    await flushAll();
    const finishedBy = clock.at;

    const jobIds = [ok.job.id, dead.job.id, canceled.job.id, cron.id];
    const history = async () => ({
      jobs: await count("SELECT count(*) AS n FROM jobs WHERE id IN (SELECT value FROM json_each(?))", JSON.stringify(jobIds)),
      occurrences: await count("SELECT count(*) AS n FROM occurrences WHERE job_id = ?", cron.id),
      deadLetters: await count("SELECT count(*) AS n FROM dead_letters WHERE job_id = ?", dead.job.id),
    });
    expect(await history()).toEqual({ jobs: 4, occurrences: 2, deadLetters: 1 });
    expect(await jobRow(cron.id)).toMatchObject({ status: "canceled", fired: 2 });
    // the occurrences left the bucket with their flush; the canceled schedule holds no execution
    expect(await bucketSql(cronStub, "SELECT id FROM executions WHERE job_id = ?", cron.id)).toEqual([]);

    // just inside the retention: everything stays
    clock.travelTo(startedAt + HISTORY_RETENTION_MS - 1);
    await runScan();
    expect(await history()).toEqual({ jobs: 4, occurrences: 2, deadLetters: 1 });

    // past it: all of it goes
    clock.travelTo(finishedBy + HISTORY_RETENTION_MS + MINUTE);
    await runScan();
    expect(await history()).toEqual({ jobs: 0, occurrences: 0, deadLetters: 0 });
    for (const id of jobIds) expect((await api(`/v1/jobs/${id}`)).status).toBe(404);
    // the execution is read from the history archive now (archive.test.ts)
    expect(await (await api(`/v1/executions/${occurrences[0]}`)).json()).toMatchObject({ id: occurrences[0], archived: true });
    const dlq = (await (await api("/v1/dlq")).json()) as { executions: { id: string }[] };
    expect(dlq.executions.map((d) => d.id)).not.toContain(dead.exe.id);
  });

  it("never purges an active or paused job however old, recent history, or a dead letter on its way to a redrive (invariant 4)", async () => {
    const now = clock.at;
    const cutoff = now - HISTORY_RETENTION_MS;
    const old = cutoff - DAY;
    const recent = cutoff + MINUTE;
    const id = () => newId("job", old, crypto.getRandomValues(new Uint8Array(16)));
    const oneOffSpec = JSON.stringify({
      target: { url: `${receiverUrl()}${uniquePath()}`, method: "POST", headers: {}, body: null },
      timeoutMs: 30_000,
      retry: { maxAttempts: 5, initialDelayMs: 1_000, maxDelayMs: 300_000, factor: 2, jitter: 0 },
      metadata: null,
      schedule: null,
    });
    const cronSpec = JSON.stringify({
      ...JSON.parse(oneOffSpec),
      schedule: { cron: "* * * * *", timezone: "UTC", startAt: null, endAt: null, maxOccurrences: null, catchUp: "one" },
    });
    const jobs = [
      { name: "completed long ago", status: "completed", cron: false, nextRunAt: old, updatedAt: old, purged: true },
      { name: "canceled long ago", status: "canceled", cron: false, nextRunAt: old, updatedAt: old, purged: true },
      { name: "recurring, canceled long ago", status: "canceled", cron: true, nextRunAt: old, updatedAt: old, purged: true },
      { name: "due long ago, completed recently", status: "completed", cron: false, nextRunAt: old, updatedAt: recent, purged: false },
      { name: "active, due long ago", status: "active", cron: false, nextRunAt: old, updatedAt: old, purged: false },
      { name: "recurring, paused long ago", status: "paused", cron: true, nextRunAt: old, updatedAt: old, purged: false },
    ].map((j) => ({ ...j, id: id() }));
    const deadLetters = [
      { name: "dead long ago", deadAt: old, redriveAt: null, purged: true },
      { name: "dead recently", deadAt: recent, redriveAt: null, purged: false },
      { name: "dead long ago, redrive on its way", deadAt: old, redriveAt: now, purged: false },
    ].map((d, i) => ({ ...d, id: occurrenceId(jobs[5]!.id, old + i * MINUTE) }));
    const occurrences = [
      { name: "finished long ago", finishedAt: old, purged: true },
      { name: "finished recently", finishedAt: recent, purged: false },
    ].map((o, i) => ({ ...o, id: occurrenceId(jobs[5]!.id, old + (10 + i) * MINUTE) }));
    await env.DB.batch([
      ...jobs.map((j) =>
        env.DB.prepare(
          `INSERT INTO jobs (tenant, id, name, bucket, status, version, synced, spec, cron, timezone, next_run_at, created_at, updated_at, fired, attempts)
           VALUES ('acme', ?, ?, ?, ?, 1, 1, ?, ?, ?, ?, ?, ?, 0, 0)`,
        ).bind(
          j.id,
          j.name,
          bucketOfJob(j.id, BUCKETS),
          j.status,
          j.cron ? cronSpec : oneOffSpec,
          j.cron ? "* * * * *" : null,
          j.cron ? "UTC" : null,
          j.nextRunAt,
          old,
          j.updatedAt,
        ),
      ),
      ...deadLetters.map((d) =>
        env.DB.prepare(
          `INSERT INTO dead_letters (tenant, execution_id, job_id, bucket, due_at, occurrence, attempts, dead_reason, dead_at, redrive_at)
           VALUES ('acme', ?, ?, ?, ?, 1, 5, 'attempts_exhausted', ?, ?)`,
        ).bind(d.id, jobs[5]!.id, bucketOfJob(jobs[5]!.id, BUCKETS), old, d.deadAt, d.redriveAt),
      ),
      ...occurrences.map((o) =>
        env.DB.prepare(
          `INSERT INTO occurrences (id, tenant, job_id, due_at, occurrence, status, attempts, finished_at)
           VALUES (?, 'acme', ?, ?, 1, 'succeeded', 1, ?)`,
        ).bind(o.id, jobs[5]!.id, old, o.finishedAt),
      ),
    ]);
    cancelAtEnd(jobs[4]!.id);

    await runScan();

    for (const j of jobs) {
      expect(await d1Of(j.id).prepare("SELECT status FROM jobs WHERE id = ?").bind(j.id).first(), j.name).toEqual(
        j.purged ? null : { status: j.status },
      );
    }
    for (const d of deadLetters) {
      expect(await count("SELECT count(*) AS n FROM dead_letters WHERE execution_id = ?", d.id), d.name).toBe(d.purged ? 0 : 1);
    }
    for (const o of occurrences) {
      expect(await count("SELECT count(*) AS n FROM occurrences WHERE id = ?", o.id), o.name).toBe(o.purged ? 0 : 1);
    }
    // the overdue active job was not dropped: the scan handed it to its bucket
    const active = jobs[4]!;
    expect(await live(bucketStub(bucketOfJob(active.id, BUCKETS)), oneOffExecutionId(active.id))).toMatchObject({
      status: "scheduled",
      dueAt: old,
    });
  });

  it("pages the purge until caught up: more finished jobs and occurrences than one page are all purged by one scan", async () => {
    const now = clock.at;
    const old = now - HISTORY_RETENTION_MS - DAY;
    const tenant = `paging-${crypto.randomUUID()}`;
    // one bucket's jobs take ceil(PURGE_PAGE / BUCKETS) a page: more than twice that, in bucket 0
    const jobCount = Math.ceil(PURGE_PAGE / BUCKETS) * 2 + 100;
    const occurrenceCount = PURGE_PAGE + 100;
    await env.DB.batch([
      env.DB.prepare(
        `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
         INSERT INTO jobs (tenant, id, name, bucket, status, version, synced, spec, next_run_at, created_at, updated_at, fired, attempts, run_status)
         SELECT ?, 'job_' || printf('%026d', i), NULL, 0, 'completed', 1, 1, '{}', ?, ?, ?, 0, 1, 'succeeded' FROM n`,
      ).bind(jobCount, tenant, old, old, old),
      env.DB.prepare(
        `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
         INSERT INTO occurrences (id, tenant, job_id, due_at, occurrence, status, attempts, finished_at)
         SELECT ? || '-' || i, ?, 'job_paging', ?, i, 'succeeded', 1, ? FROM n`,
      ).bind(occurrenceCount, tenant, tenant, old, old),
    ]);
    expect(await count("SELECT count(*) AS n FROM jobs WHERE tenant = ?", tenant)).toBe(jobCount);
    expect(await count("SELECT count(*) AS n FROM occurrences WHERE tenant = ?", tenant)).toBe(occurrenceCount);

    await runScan();

    expect(await count("SELECT count(*) AS n FROM jobs WHERE tenant = ?", tenant)).toBe(0);
    expect(await count("SELECT count(*) AS n FROM occurrences WHERE tenant = ?", tenant)).toBe(0);
  });

  it("purges idempotency keys older than IDEMPOTENCY_WINDOW_MS; a younger key still replays the original job (invariant 8)", async () => {
    const url = `${receiverUrl()}${uniquePath()}`;
    const post = (key: string) =>
      api("/v1/jobs", { method: "POST", body: { target: { url }, delay: "1h" }, headers: { "idempotency-key": key } });
    const [oldKey, youngKey] = [`old-${crypto.randomUUID()}`, `young-${crypto.randomUUID()}`];
    const first = await post(oldKey);
    expect(first.status).toBe(201);
    const original = (await first.json()) as JobJson;
    cancelAtEnd(original.id);

    clock.advance(IDEMPOTENCY_WINDOW_MS + MINUTE);
    const young = await post(youngKey);
    expect(young.status).toBe(201);
    const youngJob = (await young.json()) as JobJson;
    cancelAtEnd(youngJob.id);

    // each key's object sweeps its expired keys once a day, by alarm
    for (const key of [oldKey, youngKey]) await runDurableObjectAlarm(idempotencyKeysStub("acme", key));
    for (const [key, kept] of [
      [oldKey, false],
      [youngKey, true],
    ] as const) {
      expect(await keySql("acme", key, "SELECT key FROM idempotency_keys WHERE key = ?", key)).toEqual(kept ? [{ key }] : []);
    }

    const replay = await post(youngKey);
    expect(replay.status).toBe(200);
    expect(((await replay.json()) as JobJson).id).toBe(youngJob.id);
    const fresh = await post(oldKey);
    expect(fresh.status).toBe(201);
    const freshJob = (await fresh.json()) as JobJson;
    cancelAtEnd(freshJob.id);
    expect(freshJob.id).not.toBe(original.id);
  });

  it("a purge of old history does not reset a recurring job's occurrence count: paused past the retention, maxOccurrences 3 still fires 3 times in all", async () => {
    const job = await createJob({ target: { url: `${receiverUrl()}${uniquePath()}` }, cron: "* * * * *", maxOccurrences: 3 });
    cancelAtEnd(job.id);
    const row = (await jobRow(job.id))!;
    const stub = bucketStub(row.bucket);
    for (const at of [row.next_run_at!, row.next_run_at! + MINUTE]) {
      clock.travelTo(at);
      expect(await runDurableObjectAlarm(stub)).toBe(true);
      await deliver(messagesOf(occurrenceId(job.id, at)));
    }
    expect((await api(`/v1/jobs/${job.id}/pause`, { method: "POST" })).status).toBe(200);
    await clock.flush(stub);
    expect(await jobRow(job.id)).toMatchObject({ status: "paused", fired: 2 });
    expect(await count("SELECT count(*) AS n FROM occurrences WHERE job_id = ?", job.id)).toBe(2);

    // paused for longer than the history retention: the scan purges the two that ran, not the count
    clock.advance(HISTORY_RETENTION_MS + DAY);
    await runScan();
    expect(await count("SELECT count(*) AS n FROM occurrences WHERE job_id = ?", job.id)).toBe(0);
    expect(await jobRow(job.id)).toMatchObject({ status: "paused", fired: 2 });

    // resumed: one occurrence is left, so the one it fires is the last
    expect((await api(`/v1/jobs/${job.id}/resume`, { method: "POST" })).status).toBe(200);
    const next = (await jobRow(job.id))!.next_run_at!;
    clock.travelTo(next);
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    await deliver(messagesOf(occurrenceId(job.id, next)));
    await clock.flush(stub);
    const { results } = await d1Of(job.id).prepare("SELECT occurrence, status FROM occurrences WHERE job_id = ?").bind(job.id).all();
    expect(results).toEqual([{ occurrence: 3, status: "succeeded" }]);
    expect(await jobRow(job.id)).toMatchObject({ status: "completed", fired: 3 });
    // and nothing more fires
    clock.travelTo(next + 2 * MINUTE);
    await runAlarm(stub);
    expect(sent.filter((m) => m.executionId === occurrenceId(job.id, next + MINUTE))).toEqual([]);
    expect(await bucketSql(stub, "SELECT id FROM executions WHERE job_id = ?", job.id)).toEqual([]);
  });

  it("a recurring job canceled while its last occurrence's outcome is on its way to D1: the cancel applies (200), the occurrence keeps its outcome and leaves with the flush", async () => {
    const path = uniquePath();
    const job = await createJob({ target: { url: `${receiverUrl()}${path}` }, cron: "* * * * *" });
    cancelAtEnd(job.id);
    const row = (await jobRow(job.id))!;
    const stub = bucketStub(row.bucket);
    onTestFinished(() => clock.flush(stub)); // whatever happens, the bucket writes what it holds
    const at = row.next_run_at!;
    const id = occurrenceId(job.id, at);
    clock.travelTo(at);
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    await deliver(messagesOf(id));
    expect(await live(stub, id)).toMatchObject({ status: "succeeded" });

    const res = await api(`/v1/jobs/${job.id}`, { method: "DELETE" });
    expect(res.status).toBe(200);
    expect(await jobRow(job.id)).toMatchObject({ status: "canceled", synced: 1 });
    expect(await live(stub, id)).toMatchObject({ status: "succeeded" });

    await clock.flush(stub);
    const { results } = await d1Of(job.id).prepare("SELECT id, status FROM occurrences WHERE job_id = ?").bind(job.id).all();
    expect(results).toEqual([{ id, status: "succeeded" }]);
    expect(await bucketSql(stub, "SELECT id FROM executions WHERE job_id = ?", job.id)).toEqual([]);
    clock.travelTo(at + 2 * MINUTE);
    await runAlarm(stub);
    expect(sent.filter((m) => m.executionId === occurrenceId(job.id, at + MINUTE))).toEqual([]);
    expect(await received(path)).toHaveLength(1);
  });
});
