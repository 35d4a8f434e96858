/**
 * Named D1 queries. Set-based writes take their rows as JSON arrays through json_each (D1 allows
 * 100 bound parameters a statement), in chunks under D1's 2 MB string limit, measured in bytes.
 * db.batch() is atomic; BEGIN/transaction() are not available on D1.
 *
 * Who writes what (DESIGN.md "Ownership and cost"): the API writes jobs' definitions and status,
 * each change raising `version` with `synced = 0`; the job's bucket writes outcomes and its
 * projections (next_run_at, fired, completion), each guarded so it never goes backwards.
 */
import { and, desc, eq, inArray, lt, lte, or, sql, type SQL } from "drizzle-orm";
import { drizzle, type DrizzleD1Database } from "drizzle-orm/d1";
import { SQLiteSyncDialect } from "drizzle-orm/sqlite-core";
import { jobFromStatesSql, toStatesSql, type JobState } from "../core/lifecycle";
import type { JobDefinition, RedriveOrder } from "../bucket/protocol";
import { deadLetters, jobs, occurrences, type DeadLetterRow, type JobRow, type OccurrenceRow } from "./schema";

export type Db = DrizzleD1Database<Record<string, never>> & { $client: D1Database };

export function dbOf(d1: D1Database): Db {
  return drizzle(d1);
}

const dialect = new SQLiteSyncDialect();
const encoder = new TextEncoder();

/** D1 binds a string of at most 2 MB: set-based statements take their rows in JSON chunks below that. */
const JSON_CHUNK_BYTES = 1_000_000;

/** JSON arrays of the items, each at most JSON_CHUNK_BYTES in UTF-8 (a larger item gets a chunk of its own). */
export function jsonChunks(items: readonly unknown[]): string[] {
  const chunks: string[] = [];
  let current: string[] = [];
  let size = 2;
  for (const item of items) {
    const text = JSON.stringify(item);
    const bytes = encoder.encode(text).byteLength;
    if (current.length > 0 && size + bytes + 1 > JSON_CHUNK_BYTES) {
      chunks.push(`[${current.join(",")}]`);
      current = [];
      size = 2;
    }
    current.push(text);
    size += bytes + 1;
  }
  if (current.length > 0) chunks.push(`[${current.join(",")}]`);
  return chunks;
}

/** What D1 bills for a batch: its statements' rows written, index entries included. */
export function rowsWritten(results: D1Result[]): number {
  return results.reduce((n, r) => n + (r.meta.rows_written ?? 0), 0);
}

/** A raw statement for D1's own batch(): drizzle's batch cannot bind parameters of sql`` queries. */
function statement(db: Db, query: SQL): D1PreparedStatement {
  const { sql: text, params } = dialect.sqlToQuery(query);
  return db.$client.prepare(text).bind(...params);
}

/** The job as its bucket applies it. */
export function definitionOf(row: JobRow): JobDefinition {
  return {
    jobId: row.id,
    tenant: row.tenant,
    version: row.version,
    status: row.status,
    specJson: row.spec,
    recurring: row.cron !== null,
    nextRunAt: row.nextRunAt,
    fired: row.fired,
    attempts: row.attempts,
    attemptLog: row.attemptLog,
  };
}

// ---------------------------------------------------------------------------------------------
// create

/** One job as written by insertJobs. */
export interface NewJob {
  id: string;
  tenant: string;
  name: string | null;
  bucket: number;
  spec: string;
  cron: string | null;
  timezone: string | null;
  nextRunAt: number;
  idempotencyKey: string | null;
  requestHash: string | null;
}

export interface IdempotencyWinner {
  key: string;
  jobId: string;
  requestHash: string;
}

/**
 * insertJobs: jobs in one atomic batch, one row each (2 rows written with its index entry).
 * An item with an idempotency key is written only if it owns the key afterwards: a key row
 * younger than the dedupe window keeps its original job (invariant 8).
 * Returns the owner of every key the batch named.
 */
export async function insertJobs(
  db: Db,
  tenant: string,
  items: NewJob[],
  now: number,
  idempotencyWindowMs: number,
): Promise<{ winners: IdempotencyWinner[]; rowsWritten: number }> {
  const rowChunks = jsonChunks(
    items.map((j) => ({ id: j.id, n: j.name, b: j.bucket, s: j.spec, c: j.cron, z: j.timezone, d: j.nextRunAt, k: j.idempotencyKey })),
  );
  const keys = items.filter((j) => j.idempotencyKey !== null);
  const keyRows = JSON.stringify(keys.map((j) => ({ k: j.idempotencyKey, id: j.id, h: j.requestHash })));
  const ownsKey = sql`(json_extract(i.value, '$.k') IS NULL OR EXISTS (
      SELECT 1 FROM idempotency_keys k WHERE k.tenant = ${tenant}
        AND k.key = json_extract(i.value, '$.k') AND k.job_id = json_extract(i.value, '$.id')))`;
  const claimKeys = statement(db, sql`
    INSERT INTO idempotency_keys (tenant, key, job_id, request_hash, created_at)
    SELECT ${tenant}, json_extract(value, '$.k'), json_extract(value, '$.id'), json_extract(value, '$.h'), ${now}
    FROM json_each(${keyRows}) WHERE true
    ON CONFLICT (tenant, key) DO UPDATE SET
      job_id = excluded.job_id, request_hash = excluded.request_hash, created_at = excluded.created_at
    WHERE idempotency_keys.created_at <= ${now - idempotencyWindowMs}`);
  const insertJobRows = (rows: string) => statement(db, sql`
    INSERT INTO jobs (tenant, id, name, bucket, status, version, synced, spec, cron, timezone, next_run_at,
      idempotency_key, created_at, updated_at, fired, attempts)
    SELECT ${tenant}, json_extract(i.value, '$.id'), json_extract(i.value, '$.n'), json_extract(i.value, '$.b'), 'active', 1, 1,
      json_extract(i.value, '$.s'), json_extract(i.value, '$.c'), json_extract(i.value, '$.z'), json_extract(i.value, '$.d'),
      json_extract(i.value, '$.k'), ${now}, ${now}, 0, 0
    FROM json_each(${rows}) AS i WHERE ${ownsKey}`);
  const readKeys = statement(db, sql`
    SELECT key, job_id AS jobId, request_hash AS requestHash FROM idempotency_keys
    WHERE tenant = ${tenant} AND key IN (SELECT json_extract(value, '$.k') FROM json_each(${keyRows}))`);
  const inserts = rowChunks.map(insertJobRows);
  if (keys.length === 0) return { winners: [], rowsWritten: rowsWritten(await db.$client.batch(inserts)) };
  const results = await db.$client.batch<IdempotencyWinner>([claimKeys, ...inserts, readKeys]);
  return { winners: results[results.length - 1]!.results, rowsWritten: rowsWritten(results) };
}

// ---------------------------------------------------------------------------------------------
// job changes (the API): each raises the version and leaves the job unsynced until its bucket
// acknowledges it

export type JobChange = Partial<Pick<JobRow, "name" | "status" | "spec" | "cron" | "timezone" | "nextRunAt" | "runStatus">>;

/**
 * changeJob: writes a change if the job is still at `version` (optimistic: a concurrent change
 * makes this one retry on the newer row). Writes 1 row, plus index entries when next_run_at
 * changes and 1 for the unsynced index. Returns the new row, or undefined on a version conflict.
 */
export async function changeJob(db: Db, tenant: string, id: string, version: number, change: JobChange, now: number): Promise<JobRow | undefined> {
  const rows = await db
    .update(jobs)
    .set({ ...change, version: version + 1, synced: 0, updatedAt: now })
    .where(and(eq(jobs.tenant, tenant), eq(jobs.id, id), eq(jobs.version, version)))
    .returning();
  return rows[0];
}

/**
 * markSynced: the bucket holds these versions. Guard: the same version (a newer change stays
 * unsynced). Writes 1 row and 1 index entry each.
 */
export async function markSynced(db: Db, items: { tenant: string; jobId: string; version: number }[]): Promise<number> {
  if (items.length === 0) return 0;
  return rowsWritten(await db.$client.batch(
    jsonChunks(items).map((chunk) => statement(db, sql`
      UPDATE jobs SET synced = 1
      FROM (SELECT json_extract(value, '$.tenant') AS tenant, json_extract(value, '$.jobId') AS id,
              json_extract(value, '$.version') AS version FROM json_each(${chunk})) AS m
      WHERE jobs.tenant = m.tenant AND jobs.id = m.id AND jobs.version = m.version AND jobs.synced = 0`)),
  ));
}

/**
 * redriveOneOff: a dead one-off job is active again at `now` (a new version, so the sync pass
 * converges it) and leaves the dead-letter list, in one batch. Returns the new row or undefined.
 */
export async function redriveOneOff(db: Db, tenant: string, job: JobRow, executionId: string, now: number): Promise<JobRow | undefined> {
  const [updated] = await db.batch([
    db
      .update(jobs)
      .set({ status: "active", runStatus: "scheduled", nextRunAt: now, version: job.version + 1, synced: 0, updatedAt: now })
      .where(and(eq(jobs.tenant, tenant), eq(jobs.id, job.id), eq(jobs.version, job.version)))
      .returning(),
    db.delete(deadLetters).where(
      and(
        eq(deadLetters.tenant, tenant),
        eq(deadLetters.executionId, executionId),
        sql`EXISTS (SELECT 1 FROM ${jobs} WHERE ${jobs.tenant} = ${tenant} AND ${jobs.id} = ${job.id} AND ${jobs.version} = ${job.version + 1})`,
      ),
    ),
  ]);
  return updated[0];
}

/** markRedrive: a recurring occurrence's redrive is on its way to the bucket. Returns whether it was dead here. */
export async function markRedrive(db: Db, tenant: string, executionId: string, now: number): Promise<boolean> {
  const rows = await db
    .update(deadLetters)
    .set({ redriveAt: now })
    .where(and(eq(deadLetters.tenant, tenant), eq(deadLetters.executionId, executionId)))
    .returning({ id: deadLetters.executionId });
  return rows.length > 0;
}

/** clearRedrives: the bucket took these redrives; they leave the dead-letter list. */
export async function clearRedrives(db: Db, items: { tenant: string; executionId: string }[]): Promise<number> {
  if (items.length === 0) return 0;
  return rowsWritten(await db.$client.batch(
    jsonChunks(items).map((chunk) => statement(db, sql`
      DELETE FROM dead_letters WHERE redrive_at IS NOT NULL AND (tenant, execution_id) IN
        (SELECT json_extract(value, '$.tenant'), json_extract(value, '$.executionId') FROM json_each(${chunk}))`)),
  ));
}

// ---------------------------------------------------------------------------------------------
// the bucket's sync pass (reads)

/** pendingJobs: a page of a bucket's active jobs due before `horizonAt` (overdue included), in due order: an index range. */
export async function pendingJobs(
  db: Db,
  bucket: number,
  horizonAt: number,
  after: { at: number; tenant: string; id: string } | null,
  limit: number,
): Promise<JobDefinition[]> {
  const rows = await db
    .select()
    .from(jobs)
    .where(
      and(
        eq(jobs.bucket, bucket),
        lte(jobs.nextRunAt, horizonAt),
        eq(jobs.status, "active"),
        after ? sql`(${jobs.nextRunAt}, ${jobs.tenant}, ${jobs.id}) > (${after.at}, ${after.tenant}, ${after.id})` : undefined,
      ),
    )
    .orderBy(jobs.nextRunAt, jobs.tenant, jobs.id)
    .limit(limit);
  return rows.map(definitionOf);
}

/** unsyncedJobs: a bucket's changes its bucket has not acknowledged (the partial index). */
export async function unsyncedJobs(db: Db, bucket: number, limit: number): Promise<JobDefinition[]> {
  const rows = await db.select().from(jobs).where(and(eq(jobs.bucket, bucket), eq(jobs.synced, 0))).limit(limit);
  return rows.map(definitionOf);
}

/** pendingRedrives: a bucket's redrives of recurring occurrences not yet acknowledged. */
export async function pendingRedrives(db: Db, bucket: number, limit: number): Promise<(RedriveOrder & { tenant: string })[]> {
  const rows = await db.all<DeadLetterRow & Record<string, unknown>>(sql`
    SELECT d.tenant, d.execution_id AS executionId, d.job_id AS jobId, d.due_at AS dueAt, d.occurrence, d.attempts,
      o.attempt_log AS attemptLog
    FROM dead_letters d LEFT JOIN occurrences o ON o.id = d.execution_id
    WHERE d.bucket = ${bucket} AND d.redrive_at IS NOT NULL LIMIT ${limit}`);
  return rows.map((r) => ({
    executionId: r.executionId, jobId: r.jobId, tenant: r.tenant, occurrenceAt: r.dueAt, occurrence: r.occurrence, attempts: r.attempts,
    attemptLog: (r.attemptLog as string | null) ?? null,
  }));
}

// ---------------------------------------------------------------------------------------------
// outcomes (the bucket -> D1, once per terminal execution, in batches)

export interface FinishedExecution {
  id: string;
  jobId: string;
  tenant: string;
  bucket: number;
  recurring: boolean;
  occurrenceAt: number;
  occurrence: number;
  status: "succeeded" | "dead" | "canceled";
  attempts: number;
  lastHttpStatus: number | null;
  lastError: string | null;
  deadReason: string | null;
  finishedAt: number;
  attemptLog: string | null;
}

/** A recurring job's schedule as its bucket holds it at `version`. */
export interface ScheduleProjection {
  tenant: string;
  jobId: string;
  version: number;
  nextRunAt: number | null;
  fired: number;
  /** no occurrence is left and none is live: the job is completed */
  completed: boolean;
}

/**
 * writeOutcomes: one atomic batch.
 * - one-off: the job row gets its execution's outcome (1 row). It completes (succeeded or dead)
 *   only while active and still due at the run time this execution was for (a PATCH of the run
 *   time meanwhile keeps it active); guard: attempts never go backwards.
 * - recurring: an occurrence history row (insert or a reopened one's update).
 * - dead: a dead-letter row.
 * - schedules: next_run_at, fired and completion, only at the version the bucket holds.
 */
/**
 * A one-off job completes (the job table's "complete") when its execution ends succeeded or dead
 * while the job is still due at the run time that execution was for.
 */
const completes = sql.raw(
  `jobs.status IN (${jobFromStatesSql("complete")}) AND m.status IN (${toStatesSql(["succeed", "kill", "poison"])})
   AND jobs.next_run_at = m.occurrence_at`,
);

export async function writeOutcomes(db: Db, finished: FinishedExecution[], schedules: ScheduleProjection[], now: number): Promise<number> {
  const statements: D1PreparedStatement[] = [];
  for (const chunk of jsonChunks(finished.filter((f) => !f.recurring))) {
    statements.push(statement(db, sql`
      UPDATE jobs SET run_status = m.status, attempts = m.attempts, last_http_status = m.http, last_error = m.error,
        dead_reason = m.reason, finished_at = m.finished_at, attempt_log = m.log,
        status = CASE WHEN ${completes} THEN 'completed' ELSE jobs.status END,
        updated_at = CASE WHEN ${completes} THEN ${now} ELSE jobs.updated_at END
      FROM (SELECT json_extract(value, '$.tenant') AS tenant, json_extract(value, '$.jobId') AS job_id,
              json_extract(value, '$.status') AS status, json_extract(value, '$.attempts') AS attempts,
              json_extract(value, '$.lastHttpStatus') AS http, json_extract(value, '$.lastError') AS error,
              json_extract(value, '$.deadReason') AS reason, json_extract(value, '$.finishedAt') AS finished_at,
              json_extract(value, '$.attemptLog') AS log, json_extract(value, '$.occurrenceAt') AS occurrence_at
            FROM json_each(${chunk})) AS m
      WHERE jobs.tenant = m.tenant AND jobs.id = m.job_id AND jobs.attempts <= m.attempts`));
  }
  for (const chunk of jsonChunks(finished.filter((f) => f.recurring))) {
    statements.push(statement(db, sql`
      INSERT INTO occurrences (id, tenant, job_id, due_at, occurrence, status, attempts, last_http_status, last_error,
        dead_reason, finished_at, attempt_log)
      SELECT json_extract(value, '$.id'), json_extract(value, '$.tenant'), json_extract(value, '$.jobId'),
        json_extract(value, '$.occurrenceAt'), json_extract(value, '$.occurrence'), json_extract(value, '$.status'),
        json_extract(value, '$.attempts'), json_extract(value, '$.lastHttpStatus'), json_extract(value, '$.lastError'),
        json_extract(value, '$.deadReason'), json_extract(value, '$.finishedAt'), json_extract(value, '$.attemptLog')
      FROM json_each(${chunk}) WHERE true
      ON CONFLICT (id) DO UPDATE SET status = excluded.status, attempts = excluded.attempts,
        last_http_status = excluded.last_http_status, last_error = excluded.last_error, dead_reason = excluded.dead_reason,
        finished_at = excluded.finished_at, attempt_log = excluded.attempt_log
      WHERE occurrences.attempts <= excluded.attempts`));
  }
  const dead = finished.filter((f) => f.status === "dead");
  for (const chunk of jsonChunks(dead)) {
    statements.push(statement(db, sql`
      INSERT INTO dead_letters (tenant, execution_id, job_id, bucket, due_at, occurrence, attempts, last_http_status,
        last_error, dead_reason, dead_at)
      SELECT json_extract(value, '$.tenant'), json_extract(value, '$.id'), json_extract(value, '$.jobId'),
        json_extract(value, '$.bucket'), json_extract(value, '$.occurrenceAt'), json_extract(value, '$.occurrence'),
        json_extract(value, '$.attempts'), json_extract(value, '$.lastHttpStatus'), json_extract(value, '$.lastError'),
        json_extract(value, '$.deadReason'), json_extract(value, '$.finishedAt')
      FROM json_each(${chunk}) WHERE true
      ON CONFLICT (tenant, execution_id) DO UPDATE SET attempts = excluded.attempts,
        last_http_status = excluded.last_http_status, last_error = excluded.last_error,
        dead_reason = excluded.dead_reason, dead_at = excluded.dead_at, redrive_at = NULL`));
  }
  // a redriven execution that finished leaves the list even if its redrive was never acknowledged
  const redriven = finished.filter((f) => f.status !== "dead");
  for (const chunk of jsonChunks(redriven.map((f) => ({ tenant: f.tenant, id: f.id })))) {
    statements.push(statement(db, sql`
      DELETE FROM dead_letters WHERE redrive_at IS NOT NULL AND (tenant, execution_id) IN
        (SELECT json_extract(value, '$.tenant'), json_extract(value, '$.id') FROM json_each(${chunk}))`));
  }
  for (const chunk of jsonChunks(schedules)) {
    statements.push(statement(db, sql`
      UPDATE jobs SET next_run_at = COALESCE(m.next_run_at, jobs.next_run_at), fired = MAX(jobs.fired, m.fired),
        status = CASE WHEN m.completed AND jobs.status IN (${sql.raw(jobFromStatesSql("complete"))}) THEN 'completed' ELSE jobs.status END,
        updated_at = CASE WHEN m.completed AND jobs.status IN (${sql.raw(jobFromStatesSql("complete"))}) THEN ${now} ELSE jobs.updated_at END
      FROM (SELECT json_extract(value, '$.tenant') AS tenant, json_extract(value, '$.jobId') AS id,
              json_extract(value, '$.version') AS version, json_extract(value, '$.nextRunAt') AS next_run_at,
              json_extract(value, '$.fired') AS fired, json_extract(value, '$.completed') AS completed
            FROM json_each(${chunk})) AS m
      WHERE jobs.tenant = m.tenant AND jobs.id = m.id AND jobs.version = m.version
        AND ((m.next_run_at IS NOT NULL AND jobs.next_run_at IS NOT m.next_run_at) OR jobs.fired < m.fired OR (m.completed AND jobs.status IN (${sql.raw(jobFromStatesSql("complete"))})))`));
  }
  return statements.length > 0 ? rowsWritten(await db.$client.batch(statements)) : 0;
}

// ---------------------------------------------------------------------------------------------
// reads

export async function getJob(db: Db, tenant: string, id: string): Promise<JobRow | undefined> {
  const rows = await db.select().from(jobs).where(and(eq(jobs.tenant, tenant), eq(jobs.id, id))).limit(1);
  return rows[0];
}

export async function getJobsByIds(db: Db, tenant: string, ids: string[]): Promise<JobRow[]> {
  if (ids.length === 0) return [];
  return db.select().from(jobs).where(and(eq(jobs.tenant, tenant), inArray(jobs.id, ids)));
}

/** Newest first (ids are time-sortable, so the key order is the creation order); the cursor is the last id. */
export async function listJobs(db: Db, tenant: string, status: JobState | undefined, cursorId: string | undefined, limit: number): Promise<JobRow[]> {
  const conditions = [eq(jobs.tenant, tenant)];
  if (status) conditions.push(eq(jobs.status, status));
  if (cursorId) conditions.push(lt(jobs.id, cursorId));
  return db.select().from(jobs).where(and(...conditions)).orderBy(desc(jobs.id)).limit(limit);
}

export async function getOccurrence(db: Db, tenant: string, id: string): Promise<OccurrenceRow | undefined> {
  const rows = await db.select().from(occurrences).where(and(eq(occurrences.tenant, tenant), eq(occurrences.id, id))).limit(1);
  return rows[0];
}

/** A recurring job's finished occurrences, latest first. */
export async function listOccurrences(db: Db, tenant: string, jobId: string, limit: number): Promise<OccurrenceRow[]> {
  return db
    .select()
    .from(occurrences)
    .where(and(eq(occurrences.tenant, tenant), eq(occurrences.jobId, jobId)))
    .orderBy(desc(occurrences.dueAt))
    .limit(limit);
}

export async function getDeadLetter(db: Db, tenant: string, executionId: string): Promise<DeadLetterRow | undefined> {
  const rows = await db
    .select()
    .from(deadLetters)
    .where(and(eq(deadLetters.tenant, tenant), eq(deadLetters.executionId, executionId)))
    .limit(1);
  return rows[0];
}

/** Dead executions of a tenant, most recently dead first; cursor is the last row's (deadAt, id). */
export async function listDead(db: Db, tenant: string, cursor: { deadAt: number; id: string } | undefined, limit: number): Promise<DeadLetterRow[]> {
  const conditions = [eq(deadLetters.tenant, tenant)];
  if (cursor) {
    conditions.push(
      or(lt(deadLetters.deadAt, cursor.deadAt), and(eq(deadLetters.deadAt, cursor.deadAt), lt(deadLetters.executionId, cursor.id)))!,
    );
  }
  return db
    .select()
    .from(deadLetters)
    .where(and(...conditions))
    .orderBy(desc(deadLetters.deadAt), desc(deadLetters.executionId))
    .limit(limit);
}

// ---------------------------------------------------------------------------------------------
// retention

/**
 * purgeHistory: one page of finished jobs (per bucket, by the due-time index), occurrence history,
 * dead letters and idempotency keys older than their cutoffs. Returns the rows deleted, whether a
 * statement filled its page (more remain), and the rows written.
 */
export async function purgeHistory(
  db: Db,
  buckets: number,
  historyCutoffAt: number,
  idempotencyCutoffAt: number,
  limit: number,
): Promise<{ deleted: number; more: boolean; rowsWritten: number }> {
  const perBucket = Math.max(1, Math.ceil(limit / buckets));
  const statements: D1PreparedStatement[] = [];
  for (let b = 0; b < buckets; b++) {
    statements.push(statement(db, sql`
      DELETE FROM jobs WHERE (tenant, id) IN (
        SELECT tenant, id FROM jobs WHERE bucket = ${b} AND next_run_at < ${historyCutoffAt}
          AND status IN ('completed', 'canceled') AND updated_at < ${historyCutoffAt} LIMIT ${perBucket})`));
  }
  statements.push(
    statement(db, sql`DELETE FROM occurrences WHERE id IN (
      SELECT id FROM occurrences WHERE finished_at < ${historyCutoffAt} LIMIT ${limit})`),
    statement(db, sql`DELETE FROM dead_letters WHERE (tenant, execution_id) IN (
      SELECT tenant, execution_id FROM dead_letters WHERE dead_at < ${historyCutoffAt} AND redrive_at IS NULL LIMIT ${limit})`),
    statement(db, sql`DELETE FROM idempotency_keys WHERE rowid IN (
      SELECT rowid FROM idempotency_keys WHERE created_at < ${idempotencyCutoffAt} LIMIT ${limit})`),
  );
  const results = await db.$client.batch(statements);
  const limits = [...Array.from({ length: buckets }, () => perBucket), limit, limit, limit];
  return {
    deleted: results.reduce((n, r) => n + (r.meta.changes ?? 0), 0),
    more: results.some((r, i) => (r.meta.changes ?? 0) >= limits[i]!),
    rowsWritten: rowsWritten(results),
  };
}

/** The highest bucket any job names (a lowered BUCKETS setting must not strand a bucket's jobs). */
export async function highestBucket(db: Db): Promise<number> {
  const row = await db.get<{ b: number | null }>(sql`SELECT MAX(bucket) AS b FROM jobs`);
  return row?.b ?? -1;
}
