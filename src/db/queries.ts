/**
 * Named D1 queries. Hot-path writes are set-based: one statement per batch reading a JSON array
 * through json_each (D1 allows 100 bound parameters a statement, so multi-row VALUES would need
 * many statements). db.batch() is atomic; BEGIN/transaction() are not available on D1.
 */
import { and, desc, eq, inArray, lt, or, sql, type SQL } from "drizzle-orm";
import { drizzle, type DrizzleD1Database } from "drizzle-orm/d1";
import { SQLiteSyncDialect } from "drizzle-orm/sqlite-core";
import { attempts, executions, jobs, type AttemptRow, type ExecutionRow, type JobRow } from "./schema";
import type { JobStatus } from "../core/job";

export type Db = DrizzleD1Database<Record<string, never>> & { $client: D1Database };

export function dbOf(d1: D1Database): Db {
  return drizzle(d1);
}

const dialect = new SQLiteSyncDialect();

/** D1 binds a string of at most 2 MB: set-based statements take their rows in JSON chunks below that. */
const JSON_CHUNK_BYTES = 1_000_000;

/** JSON arrays of the items, each at most JSON_CHUNK_BYTES (an item larger than that gets a chunk of its own). */
export function jsonChunks(items: readonly unknown[]): string[] {
  const chunks: string[] = [];
  let current: string[] = [];
  let size = 2;
  for (const item of items) {
    const text = JSON.stringify(item);
    if (current.length > 0 && size + text.length + 1 > JSON_CHUNK_BYTES) {
      chunks.push(`[${current.join(",")}]`);
      current = [];
      size = 2;
    }
    current.push(text);
    size += text.length + 1;
  }
  if (current.length > 0) chunks.push(`[${current.join(",")}]`);
  return chunks;
}

/** A raw statement for D1's own batch(): drizzle's batch cannot bind parameters of sql`` queries. */
function statement(db: Db, query: SQL): D1PreparedStatement {
  const { sql: text, params } = dialect.sqlToQuery(query);
  return db.$client.prepare(text).bind(...params);
}

// ---------------------------------------------------------------------------------------------
// create

/** One job and its first execution, as written by insertJobs. */
export interface NewJob {
  id: string;
  executionId: string;
  tenant: string;
  name: string | null;
  bucket: number;
  spec: string;
  cron: string | null;
  timezone: string | null;
  dueAt: number;
  timeBucket: number;
  idempotencyKey: string | null;
  requestHash: string | null;
}

export interface IdempotencyWinner {
  key: string;
  jobId: string;
  requestHash: string;
}

/**
 * Inserts jobs and their first executions (status pending) in one atomic batch.
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
): Promise<IdempotencyWinner[]> {
  const rowChunks = jsonChunks(
    items.map((j) => ({
      id: j.id, e: j.executionId, n: j.name, b: j.bucket, s: j.spec, c: j.cron, z: j.timezone,
      d: j.dueAt, t: j.timeBucket, k: j.idempotencyKey, h: j.requestHash,
    })),
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
    INSERT INTO jobs (id, tenant, name, status, bucket, spec, cron, timezone, next_run_at, idempotency_key, created_at, updated_at)
    SELECT json_extract(i.value, '$.id'), ${tenant}, json_extract(i.value, '$.n'), 'active', json_extract(i.value, '$.b'),
      json_extract(i.value, '$.s'), json_extract(i.value, '$.c'), json_extract(i.value, '$.z'), json_extract(i.value, '$.d'),
      json_extract(i.value, '$.k'), ${now}, ${now}
    FROM json_each(${rows}) AS i WHERE ${ownsKey}`);
  const insertExecutionRows = (rows: string) => statement(db, sql`
    INSERT INTO executions (id, job_id, tenant, bucket, time_bucket, due_at, status, attempts, occurrence, created_at, updated_at)
    SELECT json_extract(i.value, '$.e'), json_extract(i.value, '$.id'), ${tenant}, json_extract(i.value, '$.b'),
      json_extract(i.value, '$.t'), json_extract(i.value, '$.d'), 'pending', 0, 1, ${now}, ${now}
    FROM json_each(${rows}) AS i WHERE ${ownsKey}`);
  const readKeys = statement(db, sql`
    SELECT key, job_id AS jobId, request_hash AS requestHash FROM idempotency_keys
    WHERE tenant = ${tenant} AND key IN (SELECT json_extract(value, '$.k') FROM json_each(${keyRows}))`);
  const inserts = rowChunks.flatMap((rows) => [insertJobRows(rows), insertExecutionRows(rows)]);
  if (keys.length === 0) {
    await db.$client.batch(inserts);
    return [];
  }
  const results = await db.$client.batch<IdempotencyWinner>([claimKeys, ...inserts, readKeys]);
  return results[results.length - 1]!.results;
}

/** pending -> scheduled after a successful hand-off; the bucket may already be further along. */
export async function markScheduled(db: Db, executionIds: string[], now: number): Promise<void> {
  if (executionIds.length === 0) return;
  await db.run(sql`
    UPDATE executions SET status = 'scheduled', updated_at = ${now}
    WHERE status = 'pending' AND id IN (SELECT value FROM json_each(${JSON.stringify(executionIds)}))`);
}

// ---------------------------------------------------------------------------------------------
// scanner window

export interface PendingExecution {
  executionId: string;
  jobId: string;
  tenant: string;
  dueAt: number;
  occurrence: number;
  spec: string;
  /** 1 for a recurring job */
  recurring: number;
  jobStatus: JobStatus;
}

/** One page of a bucket's pending executions due before `horizonAt` (overdue included), an index range. */
export async function pendingWindow(
  db: Db,
  bucket: number,
  maxTimeBucket: number,
  horizonAt: number,
  limit: number,
): Promise<PendingExecution[]> {
  return db.all<PendingExecution>(sql`
    SELECT e.id AS executionId, e.job_id AS jobId, e.tenant AS tenant, e.due_at AS dueAt, e.occurrence AS occurrence,
      j.spec AS spec, j.cron IS NOT NULL AS recurring, j.status AS jobStatus
    FROM executions e JOIN jobs j ON j.id = e.job_id
    WHERE e.bucket = ${bucket} AND e.status = 'pending' AND e.time_bucket <= ${maxTimeBucket} AND e.due_at <= ${horizonAt}
      AND j.status = 'active'
    ORDER BY e.time_bucket, e.due_at
    LIMIT ${limit}`);
}

// ---------------------------------------------------------------------------------------------
// mirror (bucket -> D1)

/** A next occurrence due beyond the lookahead, created by its bucket, to wait in D1 as pending. */
export interface PendingOccurrence {
  id: string;
  jobId: string;
  tenant: string;
  bucket: number;
  timeBucket: number;
  occurrenceAt: number;
  occurrence: number;
}

/** An execution's state as its bucket holds it. */
export interface MirroredExecution extends PendingOccurrence {
  /** what this state means for the job (core/job.ts jobEffectOf) */
  jobEffect: "complete" | "reactivate" | null;
  /** the occurrence number if this occurrence has fired, for the job's budget; else 0 */
  fired: number;
  status: string;
  attempts: number;
  lastHttpStatus: number | null;
  lastError: string | null;
  deadReason: string | null;
  finishedAt: number | null;
}

export interface MirroredAttempt {
  executionId: string;
  attempt: number;
  dueAt: number;
  startedAt: number;
  finishedAt: number | null;
  outcome: string | null;
  httpStatus: number | null;
  error: string | null;
}

/**
 * Writes a bucket's changes in one atomic batch: new pending occurrences, changed executions
 * (inserted when D1 has not seen them, e.g. a near cron occurrence made by the bucket), their
 * jobs' status and fired count, and attempts. The bucket is the single writer of a handed-off
 * execution, so its latest state wins.
 */
export async function mirrorToD1(
  db: Db,
  changed: MirroredExecution[],
  changedAttempts: MirroredAttempt[],
  pending: PendingOccurrence[],
  now: number,
): Promise<void> {
  const statements: D1PreparedStatement[] = [];
  for (const p of jsonChunks(pending)) {
    statements.push(statement(db, sql`
      INSERT INTO executions (id, job_id, tenant, bucket, time_bucket, due_at, status, attempts, occurrence, created_at, updated_at)
      SELECT json_extract(value, '$.id'), json_extract(value, '$.jobId'), json_extract(value, '$.tenant'),
        json_extract(value, '$.bucket'), json_extract(value, '$.timeBucket'), json_extract(value, '$.occurrenceAt'),
        'pending', 0, json_extract(value, '$.occurrence'), ${now}, ${now}
      FROM json_each(${p}) WHERE true
      ON CONFLICT DO NOTHING`));
  }
  for (const e of jsonChunks(changed)) {
    statements.push(statement(db, sql`
      INSERT INTO executions (id, job_id, tenant, bucket, time_bucket, due_at, status, attempts, occurrence, last_http_status,
        last_error, dead_reason, finished_at, created_at, updated_at)
      SELECT json_extract(value, '$.id'), json_extract(value, '$.jobId'), json_extract(value, '$.tenant'),
        json_extract(value, '$.bucket'), json_extract(value, '$.timeBucket'), json_extract(value, '$.occurrenceAt'),
        json_extract(value, '$.status'), json_extract(value, '$.attempts'), json_extract(value, '$.occurrence'),
        json_extract(value, '$.lastHttpStatus'),
        json_extract(value, '$.lastError'), json_extract(value, '$.deadReason'), json_extract(value, '$.finishedAt'),
        ${now}, ${now}
      FROM json_each(${e}) WHERE true
      ON CONFLICT (id) DO UPDATE SET status = excluded.status, attempts = excluded.attempts,
        last_http_status = excluded.last_http_status, last_error = excluded.last_error,
        dead_reason = excluded.dead_reason, finished_at = excluded.finished_at, updated_at = excluded.updated_at`));
    // a job completes when its last (or only) execution ends; a redrive reactivates it.
    // Only rows whose job really changes are written.
    statements.push(statement(db, sql`
      UPDATE jobs SET status = m.job_status, updated_at = ${now}
      FROM (SELECT json_extract(value, '$.jobId') AS job_id,
              CASE json_extract(value, '$.jobEffect') WHEN 'complete' THEN 'completed' ELSE 'active' END AS job_status
            FROM json_each(${e}) WHERE json_extract(value, '$.jobEffect') IS NOT NULL) AS m
      WHERE jobs.id = m.job_id AND jobs.status IN ('active', 'completed') AND jobs.status != m.job_status`));
    statements.push(statement(db, sql`
      UPDATE jobs SET fired = m.fired
      FROM (SELECT json_extract(value, '$.jobId') AS job_id, MAX(json_extract(value, '$.fired')) AS fired
            FROM json_each(${e}) GROUP BY 1) AS m
      WHERE jobs.id = m.job_id AND jobs.cron IS NOT NULL AND m.fired > jobs.fired`));
  }
  for (const a of jsonChunks(changedAttempts)) {
    statements.push(statement(db, sql`
      INSERT INTO attempts (execution_id, attempt, due_at, started_at, finished_at, outcome, http_status, error)
      SELECT json_extract(value, '$.executionId'), json_extract(value, '$.attempt'), json_extract(value, '$.dueAt'),
        json_extract(value, '$.startedAt'), json_extract(value, '$.finishedAt'), json_extract(value, '$.outcome'),
        json_extract(value, '$.httpStatus'), json_extract(value, '$.error')
      FROM json_each(${a}) WHERE true
      ON CONFLICT (execution_id, attempt) DO UPDATE SET finished_at = excluded.finished_at,
        outcome = excluded.outcome, http_status = excluded.http_status, error = excluded.error`));
  }
  if (statements.length > 0) await db.$client.batch(statements);
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

/** Newest first; the cursor is the last row's (createdAt, id). */
export async function listJobs(
  db: Db,
  tenant: string,
  status: JobStatus | undefined,
  cursor: { createdAt: number; id: string } | undefined,
  limit: number,
): Promise<JobRow[]> {
  const conditions = [eq(jobs.tenant, tenant)];
  if (status) conditions.push(eq(jobs.status, status));
  if (cursor) {
    conditions.push(
      or(lt(jobs.createdAt, cursor.createdAt), and(eq(jobs.createdAt, cursor.createdAt), lt(jobs.id, cursor.id)))!,
    );
  }
  return db.select().from(jobs).where(and(...conditions)).orderBy(desc(jobs.createdAt), desc(jobs.id)).limit(limit);
}

export async function getExecution(db: Db, tenant: string, id: string): Promise<ExecutionRow | undefined> {
  const rows = await db
    .select()
    .from(executions)
    .where(and(eq(executions.tenant, tenant), eq(executions.id, id)))
    .limit(1);
  return rows[0];
}

/** A job's executions, latest due first, with their attempts. */
export async function listExecutionsOfJob(
  db: Db,
  tenant: string,
  jobId: string,
  limit: number,
): Promise<{ execution: ExecutionRow; attempts: AttemptRow[] }[]> {
  const rows = await db
    .select()
    .from(executions)
    .where(and(eq(executions.tenant, tenant), eq(executions.jobId, jobId)))
    .orderBy(desc(executions.dueAt))
    .limit(limit);
  if (rows.length === 0) return [];
  const attemptRows = await db
    .select()
    .from(attempts)
    .where(inArray(attempts.executionId, rows.map((r) => r.id)))
    .orderBy(attempts.executionId, attempts.attempt);
  return rows.map((execution) => ({
    execution,
    attempts: attemptRows.filter((a) => a.executionId === execution.id),
  }));
}

/** Dead executions of a tenant, most recently dead first; cursor is the last row's (updatedAt, id). */
export async function listDead(
  db: Db,
  tenant: string,
  cursor: { updatedAt: number; id: string } | undefined,
  limit: number,
): Promise<ExecutionRow[]> {
  const conditions = [eq(executions.tenant, tenant), eq(executions.status, "dead")];
  if (cursor) {
    conditions.push(
      or(
        lt(executions.updatedAt, cursor.updatedAt),
        and(eq(executions.updatedAt, cursor.updatedAt), lt(executions.id, cursor.id)),
      )!,
    );
  }
  return db
    .select()
    .from(executions)
    .where(and(...conditions))
    .orderBy(desc(executions.updatedAt), desc(executions.id))
    .limit(limit);
}

// ---------------------------------------------------------------------------------------------
// job changes: cancel, pause, resume, PATCH

/**
 * Optionally moves the job to `jobStatus`, cancels its pending (D1-only) executions, and returns
 * the executions that may live in its bucket, which the caller closes there. One atomic batch.
 */
export async function closeJobExecutions(
  db: Db,
  tenant: string,
  jobId: string,
  jobStatus: "canceled" | "paused" | null,
  reason: string,
  now: number,
): Promise<{ executionId: string; dueAt: number; status: string }[]> {
  const statements = [
    statement(db, sql`
      UPDATE executions SET status = 'canceled', finished_at = ${now}, updated_at = ${now}, last_error = ${reason}
      WHERE tenant = ${tenant} AND job_id = ${jobId} AND status = 'pending'`),
    statement(db, sql`
      SELECT id AS executionId, due_at AS dueAt, status FROM executions
      WHERE tenant = ${tenant} AND job_id = ${jobId} AND status IN ('scheduled', 'dispatched', 'running')`),
  ];
  if (jobStatus !== null) {
    statements.unshift(
      statement(db, sql`
        UPDATE jobs SET status = ${jobStatus}, updated_at = ${now}
        WHERE tenant = ${tenant} AND id = ${jobId} AND status IN ('active', 'paused')`),
    );
  }
  const results = await db.$client.batch<{ executionId: string; dueAt: number; status: string }>(statements);
  return results[results.length - 1]!.results;
}

/** Writes a job's new settings (PATCH, resume). */
export async function updateJob(
  db: Db,
  tenant: string,
  jobId: string,
  change: { name: string | null; spec: string; cron: string | null; timezone: string | null; nextRunAt: number | null; status: JobStatus },
  now: number,
): Promise<void> {
  await db
    .update(jobs)
    .set({ ...change, updatedAt: now })
    .where(and(eq(jobs.tenant, tenant), eq(jobs.id, jobId)));
}

/** A new execution of an existing job (resume, PATCH), pending until handed off; reopens the same occurrence if pause or a reschedule canceled it. */
export async function insertExecution(
  db: Db,
  row: { id: string; jobId: string; tenant: string; bucket: number; timeBucket: number; dueAt: number; occurrence: number },
  now: number,
): Promise<boolean> {
  const result = await db.run(sql`
    INSERT INTO executions (id, job_id, tenant, bucket, time_bucket, due_at, status, attempts, occurrence, created_at, updated_at)
    VALUES (${row.id}, ${row.jobId}, ${row.tenant}, ${row.bucket}, ${row.timeBucket}, ${row.dueAt}, 'pending', 0,
      ${row.occurrence}, ${now}, ${now})
    ON CONFLICT (id) DO UPDATE SET status = 'pending', finished_at = NULL, last_error = NULL, attempts = 0,
      occurrence = excluded.occurrence, updated_at = excluded.updated_at
    WHERE executions.status = 'canceled'`);
  return (result.meta.changes ?? 0) > 0;
}

// ---------------------------------------------------------------------------------------------
// retention

/**
 * Deletes one page of terminal history, finished jobs with no history left, and idempotency keys
 * older than their cutoffs. Returns the number of executions deleted (a full page means more remain).
 */
export async function purgeHistory(
  db: Db,
  historyCutoffAt: number,
  idempotencyCutoffAt: number,
  limit: number,
): Promise<number> {
  const old = sql`SELECT id FROM executions
    WHERE status IN ('succeeded', 'dead', 'canceled') AND finished_at < ${historyCutoffAt} LIMIT ${limit}`;
  const [, deleted] = await db.$client.batch([
    statement(db, sql`DELETE FROM attempts WHERE execution_id IN (${old})`),
    statement(db, sql`DELETE FROM executions WHERE id IN (${old})`),
    statement(db, sql`DELETE FROM jobs WHERE id IN (
      SELECT id FROM jobs WHERE status IN ('completed', 'canceled') AND updated_at < ${historyCutoffAt}
        AND NOT EXISTS (SELECT 1 FROM executions e WHERE e.job_id = jobs.id) LIMIT ${limit})`),
    statement(db, sql`DELETE FROM idempotency_keys WHERE rowid IN (
      SELECT rowid FROM idempotency_keys WHERE created_at < ${idempotencyCutoffAt} LIMIT ${limit})`),
  ]);
  return deleted?.meta.changes ?? 0;
}
