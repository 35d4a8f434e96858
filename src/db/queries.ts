/**
 * Named D1 queries, through drizzle's query builder over the schema in ./schema.ts. Set-based
 * writes take their rows as one JSON array parameter read with json_each (D1 allows 100 bound
 * parameters a statement), in chunks under D1's 2 MB string limit, measured in bytes.
 * db.batch() is atomic; BEGIN/transaction() are not available on D1.
 *
 * Who writes what (DESIGN.md "Ownership and cost"): the API writes jobs' definitions and status,
 * each change raising `version` with `synced = 0`; the job's bucket writes outcomes and its
 * projections (next_run_at, fired, completion), each guarded so it never goes backwards.
 *
 * Where drizzle has no operator, a small typed `sql` fragment stands inside a builder query:
 * json_extract over json_each, row values `(a, b) IN (...)`, `excluded.<column>`, CASE, MAX, IS NOT.
 */
import {
  and,
  desc,
  eq,
  exists,
  getTableColumns,
  gte,
  inArray,
  isNotNull,
  isNull,
  lt,
  lte,
  max,
  or,
  type SQL,
  type SQLWrapper,
  type Subquery,
  sql,
} from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import { type DrizzleD1Database, drizzle } from "drizzle-orm/d1";
import type { AnySQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";
import type { JobDefinition, RedriveOrder } from "../bucket/protocol";
import { executionIdFloor, timeOfId } from "../core/id";
import { type ExecutionState, JOB_TRANSITIONS, type JobState, TERMINAL_STATES, type TerminalState, TRANSITIONS } from "../core/lifecycle";
import type { Scan } from "../core/page";
import {
  type DeadLetterRow,
  deadLetters,
  flowKeys,
  idempotencyKeys,
  type JobRow,
  jobLabels,
  jobs,
  type OccurrenceRow,
  occurrences,
  schedulerMeta,
} from "./schema";

export type Db = DrizzleD1Database<Record<string, never>> & { $client: D1Database };

export function dbOf(d1: D1Database): Db {
  return drizzle(d1);
}

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

/** The elements of a JSON array parameter, as the FROM of a set-based statement. */
function each(json: string): SQL {
  return sql`json_each(${json})`;
}

/**
 * A field of json_each's current element, typed by the element type T. Unqualified `value` is
 * json_each's: no D1 table has a column of that name.
 */
function element<T>() {
  return <K extends keyof T & string>(key: K) => sql<T[K]>`json_extract(value, ${sql.raw(`'$.${key}'`)})`;
}

/** A value bound as a column of a select list (INSERT ... SELECT names every column). */
function bound<T>(value: T): SQL<T> {
  return sql<T>`${value}`;
}

/** INSERT ... SELECT's select list: drizzle wants each expression aliased (by its column's key). */
function insertRow<T extends Record<string, SQL>>(fields: T): { [K in keyof T]: SQL.Aliased<T[K]["_"]["type"]> } {
  return Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, v.as(k)])) as { [K in keyof T]: SQL.Aliased<T[K]["_"]["type"]> };
}

/** `excluded.<column>`: the value an upsert proposed (drizzle has no helper for it). */
function proposed(column: AnySQLiteColumn): SQL {
  return sql`excluded.${sql.identifier(column.name)}`;
}

/** An upsert's `set`: each key takes the proposed value. */
function takeProposed<T extends SQLiteTable, K extends keyof T["_"]["columns"] & string>(table: T, keys: readonly K[]): Record<K, SQL> {
  const columns = getTableColumns(table);
  return Object.fromEntries(keys.map((k) => [k, proposed(columns[k]!)])) as Record<K, SQL>;
}

/** `(SELECT value FROM json_each(?))`: the scalars of a JSON array parameter, for an IN (one bound parameter, whatever their number). */
function valuesOf(json: string): SQL {
  return sql`(SELECT value FROM json_each(${json}))`;
}

/** db.batch over a list of selects built at run time: each one's rows (one statement runs alone). */
async function batchAll<T>(db: Db, statements: (BatchItem<"sqlite"> & PromiseLike<T[]>)[]): Promise<T[][]> {
  if (statements.length === 0) return [];
  if (statements.length === 1) return [await statements[0]!];
  return (await db.batch(statements as unknown as [BatchItem<"sqlite">, ...BatchItem<"sqlite">[]])) as unknown as T[][];
}

/** db.batch over a list built at run time, of statements without RETURNING: their D1 results. */
async function batchRun(db: Db, statements: BatchItem<"sqlite">[]): Promise<D1Result[]> {
  if (statements.length === 0) return [];
  return (await db.batch(statements as [BatchItem<"sqlite">, ...BatchItem<"sqlite">[]])) as D1Result[];
}

/** A job's states from which the bucket completes it (the job table's "complete"). */
const COMPLETE_FROM: readonly JobState[] = JOB_TRANSITIONS.complete.from;
const COMPLETED: JobState = JOB_TRANSITIONS.complete.to;
/** A job's states after which its row is history (the purge's). */
const FINISHED: readonly JobState[] = ["completed", "canceled"];
/** A dead execution's state (a one-off job's run_status): its dead letter waits for a redrive. */
const DEAD: ExecutionState = "dead";

/** A job's columns its bucket applies (definitionOf): not its outcome's, labels or callbacks. */
const DEFINITION = {
  id: jobs.id,
  tenant: jobs.tenant,
  version: jobs.version,
  status: jobs.status,
  spec: jobs.spec,
  cron: jobs.cron,
  nextRunAt: jobs.nextRunAt,
  fired: jobs.fired,
  attempts: jobs.attempts,
  attemptLog: jobs.attemptLog,
};

/** The job as its bucket applies it. */
export function definitionOf(row: Pick<JobRow, keyof typeof DEFINITION>): JobDefinition {
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
  /** null: none */
  labels: Record<string, string> | null;
}

/**
 * insertJobs: jobs in one atomic batch (one shard's), one row each (2 rows written with its index
 * entry), and one job_labels row per label. A job already there (a retry that inserts the job of
 * an idempotency key's claim under the same id) is left as it is. Idempotency keys are claimed
 * before, in their own objects (idempotency/idempotency-keys.ts). Returns the rows written and the
 * database's size after (meta.size_after, bytes; db/shards.ts keeps the room each shard has left).
 */
export async function insertJobs(
  db: Db,
  tenant: string,
  items: NewJob[],
  now: number,
): Promise<{ rowsWritten: number; sizeAfter: number | null }> {
  const jobItems = items.map((j) => ({
    id: j.id,
    n: j.name,
    b: j.bucket,
    s: j.spec,
    c: j.cron,
    z: j.timezone,
    d: j.nextRunAt,
    k: j.idempotencyKey,
    l: j.labels === null ? null : JSON.stringify(j.labels),
  }));
  const job = element<(typeof jobItems)[number]>();
  const insertJobRows = (rows: string) =>
    db
      .insert(jobs)
      .select(
        db
          .select(
            insertRow({
              tenant: bound(tenant),
              id: job("id"),
              name: job("n"),
              bucket: job("b"),
              status: bound<JobState>("active"),
              version: bound(1),
              synced: bound(1),
              spec: job("s"),
              cron: job("c"),
              timezone: job("z"),
              nextRunAt: job("d"),
              idempotencyKey: job("k"),
              createdAt: bound(now),
              updatedAt: bound(now),
              fired: bound(0),
              runStatus: bound(null),
              attempts: bound(0),
              lastHttpStatus: bound(null),
              lastError: bound(null),
              deadReason: bound(null),
              finishedAt: bound(null),
              attemptLog: bound(null),
              labels: job("l"),
              callbacks: bound(null),
            }),
          )
          .from(each(rows))
          .where(sql`true`), // ends the FROM before ON CONFLICT (SQLite reads an ON after it as a join's)
      )
      .onConflictDoNothing();
  // after the jobs: a label row for each of their labels (a repeat's already exist)
  const labelItems = items.flatMap((j) => Object.entries(j.labels ?? {}).map(([k, v]) => ({ id: j.id, k, v })));
  const label = element<(typeof labelItems)[number]>();
  const insertLabelRows = (rows: string) =>
    db
      .insert(jobLabels)
      .select(
        db
          .select(insertRow({ tenant: bound(tenant), key: label("k"), value: label("v"), jobId: label("id") }))
          .from(each(rows))
          .where(
            exists(
              db
                .select({ one: sql`1` })
                .from(jobs)
                .where(and(eq(jobs.tenant, tenant), eq(jobs.id, label("id")))),
            ),
          ),
      )
      .onConflictDoNothing();
  const inserts = [...jsonChunks(jobItems).map(insertJobRows), ...jsonChunks(labelItems).map(insertLabelRows)];
  const results = await batchRun(db, inserts);
  return { rowsWritten: rowsWritten(results), sizeAfter: results.at(-1)?.meta.size_after ?? null };
}

/** The database's size (meta.size_after, bytes) by a statement that reads no row; null if D1 does not say. */
export async function sizeOf(db: Db): Promise<number | null> {
  const result = (await db.run(sql`SELECT 1`)) as unknown as D1Result;
  return result.meta.size_after ?? null;
}

/**
 * legacyKeyOwners: the owners of these keys as D1's idempotency_keys table has them, from before
 * keys had objects of their own (idempotency/idempotency-keys.ts): read until the table is empty
 * (the purge empties it within the dedupe window; nothing writes it any more). Reads only.
 */
export async function legacyKeyOwners(
  db: Db,
  tenant: string,
  keys: string[],
  now: number,
  windowMs: number,
): Promise<{ key: string; jobId: string; requestHash: string; claimedAt: number }[]> {
  if (keys.length === 0) return [];
  const statements = jsonChunks(keys).map((chunk) =>
    db
      .select({
        key: idempotencyKeys.key,
        jobId: idempotencyKeys.jobId,
        requestHash: idempotencyKeys.requestHash,
        claimedAt: idempotencyKeys.createdAt,
      })
      .from(idempotencyKeys)
      .where(
        and(
          eq(idempotencyKeys.tenant, tenant),
          inArray(idempotencyKeys.key, valuesOf(chunk)),
          gte(idempotencyKeys.createdAt, now - windowMs + 1),
        ),
      ),
  );
  return (await batchAll(db, statements)).flat();
}

/** Whether D1's legacy idempotency_keys table still holds any key. */
export async function hasLegacyKeys(db: Db): Promise<boolean> {
  return (await db.select({ one: sql`1` }).from(idempotencyKeys).limit(1)).length > 0;
}

// ---------------------------------------------------------------------------------------------
// job changes (the API): each raises the version and leaves the job unsynced until its bucket
// acknowledges it

export type JobChange = Partial<Pick<JobRow, "name" | "status" | "spec" | "cron" | "timezone" | "nextRunAt" | "runStatus">> & {
  /** replaces the job's labels (null: none); absent: unchanged */
  labels?: Record<string, string> | null;
};

/**
 * changeJob: writes a change if the job is still at `version` and in one of the states `from`
 * (the job table's from-states of the change: its bucket completes a job without raising its
 * version, so the version alone cannot tell an active job from the completed one it became).
 * Optimistic: a concurrent change makes this one retry on the newer row. Writes 1 row, plus index entries when next_run_at
 * changes and 1 for the unsynced index; a change of labels also deletes the old label rows and
 * writes the new ones (1 row each). Returns the new row, or undefined on a version conflict.
 */
export async function changeJob(
  db: Db,
  tenant: string,
  id: string,
  version: number,
  from: readonly JobState[],
  change: JobChange,
  now: number,
): Promise<JobRow | undefined> {
  const { labels, ...columns } = change;
  const update = db
    .update(jobs)
    .set({
      ...columns,
      ...(labels === undefined ? {} : { labels: labels === null ? null : JSON.stringify(labels) }),
      version: version + 1,
      synced: 0,
      updatedAt: now,
    })
    .where(and(eq(jobs.tenant, tenant), eq(jobs.id, id), eq(jobs.version, version), inArray(jobs.status, [...from])))
    .returning();
  if (labels === undefined) return (await update)[0];
  // job_labels follows the row's own labels JSON, so the two can never disagree: before the
  // update, the rows of the labels it holds at `version` go (only if it is still there, so only
  // when this update applies); after it, the rows of the labels it holds now are inserted (a
  // concurrent change that won the version leaves its labels, whose rows already exist)
  const [, rows] = await db.batch([
    db.delete(jobLabels).where(inArray(LABEL_KEY, labelRowsOf(db, tenant, id, version, from))),
    update,
    db
      .insert(jobLabels)
      .select(labelRowsOf(db, tenant, id, version + 1))
      .onConflictDoNothing(),
  ]);
  return rows[0];
}

/** The job_labels rows of a job's labels JSON, as the row holds them at `version` (none when it is elsewhere). */
function labelRowsOf(db: Db, tenant: string, id: string, version: number, from?: readonly JobState[]) {
  const states = from
    ? sql` AND ${JOB.status} IN (${sql.join(
        from.map((s) => sql`${s}`),
        sql`, `,
      )})`
    : sql``;
  return labelRowsWhere(db, sql`${JOB.tenant} = ${tenant} AND ${JOB.id} = ${id} AND ${JOB.version} = ${version}${states}`);
}

/** Columns of jobs spelled with the table's name: json_each beside it has an id, key and value of its own. */
const JOB = {
  tenant: sql.raw(`"jobs"."tenant"`),
  id: sql.raw(`"jobs"."id"`),
  version: sql.raw(`"jobs"."version"`),
  status: sql.raw(`"jobs"."status"`),
  labels: sql.raw(`"jobs"."labels"`),
};

/** The job_labels rows of the labels JSON of the jobs `where` picks (in JOB's spelling): each row's full key. */
function labelRowsWhere(db: Db, where: SQL) {
  return db
    .select({
      tenant: sql<string>`${JOB.tenant}`.as("tenant"),
      key: sql<string>`labels_entry.key`.as("key"),
      value: sql<string>`labels_entry.value`.as("value"),
      jobId: sql<string>`${JOB.id}`.as("job_id"),
    })
    .from(sql`${jobs}, json_each(${JOB.labels}) AS labels_entry`)
    .where(where);
}

const LABEL_KEY = sql`(${jobLabels.tenant}, ${jobLabels.key}, ${jobLabels.value}, ${jobLabels.jobId})`;

/**
 * markSynced: the bucket holds these versions. Guard: the same version (a newer change stays
 * unsynced). Writes 1 row and 1 index entry each.
 */
export async function markSynced(db: Db, items: { tenant: string; jobId: string; version: number }[]): Promise<number> {
  if (items.length === 0) return 0;
  const m = element<(typeof items)[number]>();
  const statements = jsonChunks(items).map((chunk) =>
    db
      .update(jobs)
      .set({ synced: 1 })
      .from(each(chunk))
      .where(and(eq(jobs.tenant, m("tenant")), eq(jobs.id, m("jobId")), eq(jobs.version, m("version")), eq(jobs.synced, 0))),
  );
  return rowsWritten(await batchRun(db, statements));
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
        exists(
          db
            .select({ one: sql`1` })
            .from(jobs)
            .where(and(eq(jobs.tenant, tenant), eq(jobs.id, job.id), eq(jobs.version, job.version + 1))),
        ),
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
  const statements = jsonChunks(items).map((chunk) => deleteRedriven(db, chunk, "executionId"));
  return rowsWritten(await batchRun(db, statements));
}

/** The dead letters the JSON array `chunk` names (by `tenant` and `idKey`) whose redrive is on its way. */
function deleteRedriven(db: Db, chunk: string, idKey: "executionId" | "id") {
  const m = element<Record<"tenant" | typeof idKey, string>>();
  const named = db.select({ tenant: m("tenant"), id: m(idKey) }).from(each(chunk));
  return db
    .delete(deadLetters)
    .where(and(isNotNull(deadLetters.redriveAt), inArray(sql`(${deadLetters.tenant}, ${deadLetters.executionId})`, named)));
}

// ---------------------------------------------------------------------------------------------
// the bucket's sync pass (reads)

/**
 * What a page of the sync pass reads at most of its jobs' specs and attempt logs (UTF-8 bytes),
 * besides one job more: the page stops after the job that reaches it, so it always holds one. The
 * largest spec the API takes is about 0.82 MB (a batch item: core/job.ts LIMITS at their most
 * costly characters, test/support/largest-job.mjs), so a page reads at most about 4.8 MB: far
 * under D1's 50 MB result limit, and a small share of the 128 MB an isolate has. The pass runs
 * inside the Bucket object, whose isolate other objects and requests share, and the scan syncs six
 * buckets at once (scanner/scan.ts). Measured (scripts/heap-peak.mjs sync): a pass over 120 of
 * the largest jobs took the isolate's live heap from 6.4 to 12.5 MiB, six buckets' at once to
 * 14 MiB; with pages of 500 jobs, to 166 MiB.
 */
export const SYNC_PAGE_BYTES = 4_000_000;

/** A page of a read cut by count and by bytes; `more`: it was cut (the next page may hold more). */
export interface Page<T> {
  rows: T[];
  more: boolean;
}

/**
 * The definitions of the jobs `where` picks, in the order of the columns `order` names (an index's,
 * so SQLite streams the range), at most `limit` and `budget` bytes (plus the job that reaches it):
 * a window sum over the range inside the LIMIT, so D1 never sends more. Rows read: 3 per job (the
 * range, the window's pass, the page; measured with meta.rows_read), at D1's $0.001 per million.
 */
async function definitionsWithin(
  db: Db,
  where: SQL,
  order: (keyof typeof DEFINITION)[],
  limit: number,
  budget: number,
): Promise<Page<JobDefinition>> {
  const bytes = sql<number>`length(CAST(${jobs.spec} AS BLOB)) + ifnull(length(CAST(${jobs.attemptLog} AS BLOB)), 0) + ${ROW_BYTES}`;
  const columns = order.map((k) => DEFINITION[k]);
  const window = db
    .select({
      ...DEFINITION,
      bytes: bytes.as("bytes"),
      // the page's bytes through this job
      through: sql<number>`sum(${bytes}) OVER (ORDER BY ${sql.join(columns, sql`, `)} ROWS UNBOUNDED PRECEDING)`.as("through"),
    })
    .from(jobs)
    .where(where)
    .orderBy(...columns)
    .limit(limit)
    .as("page");
  // no ORDER BY outside: it would sort the page again in a temporary b-tree (4 rows read per job); JS sorts it
  const rows = await db.select().from(window).where(sql`${window.through} - ${window.bytes} < ${budget}`);
  rows.sort((a, b) => {
    for (const k of order) if (a[k] !== b[k]) return a[k]! < b[k]! ? -1 : 1;
    return 0;
  });
  return { rows: rows.map(definitionOf), more: rows.length >= limit || (rows.at(-1)?.through ?? 0) >= budget };
}

/**
 * pendingJobs: a page of a bucket's active jobs due before `horizonAt` (overdue included), in due
 * order: an index range, at most `limit` jobs and SYNC_PAGE_BYTES (definitionsWithin).
 */
export async function pendingJobs(
  db: Db,
  bucket: number,
  horizonAt: number,
  after: { at: number; tenant: string; id: string } | null,
  limit: number,
  budget = SYNC_PAGE_BYTES,
): Promise<Page<JobDefinition>> {
  const where = and(
    eq(jobs.bucket, bucket),
    lte(jobs.nextRunAt, horizonAt),
    eq(jobs.status, "active"),
    after ? sql`(${jobs.nextRunAt}, ${jobs.tenant}, ${jobs.id}) > (${after.at}, ${after.tenant}, ${after.id})` : undefined,
  )!;
  return definitionsWithin(db, where, ["nextRunAt", "tenant", "id"], limit, budget);
}

/**
 * unsyncedJobs: a page of a bucket's changes its bucket has not acknowledged (the partial index, in
 * its key order), at most `limit` jobs and SYNC_PAGE_BYTES (definitionsWithin).
 */
export async function unsyncedJobs(db: Db, bucket: number, limit: number, budget = SYNC_PAGE_BYTES): Promise<Page<JobDefinition>> {
  return definitionsWithin(db, and(eq(jobs.bucket, bucket), eq(jobs.synced, 0))!, ["tenant", "id"], limit, budget);
}

/** pendingRedrives: a bucket's redrives of recurring occurrences not yet acknowledged. */
export async function pendingRedrives(db: Db, bucket: number, limit: number): Promise<(RedriveOrder & { tenant: string })[]> {
  return db
    .select({
      executionId: deadLetters.executionId,
      jobId: deadLetters.jobId,
      tenant: deadLetters.tenant,
      occurrenceAt: deadLetters.dueAt,
      occurrence: deadLetters.occurrence,
      attempts: deadLetters.attempts,
      attemptLog: occurrences.attemptLog,
    })
    .from(deadLetters)
    .leftJoin(occurrences, and(eq(occurrences.tenant, deadLetters.tenant), eq(occurrences.id, deadLetters.executionId)))
    .where(and(eq(deadLetters.bucket, bucket), isNotNull(deadLetters.redriveAt)))
    .limit(limit);
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
  /** JSON: its callback, scheduled (core/callback.ts StoredCallback[]); absent or null when it fires none */
  callbacks?: string | null;
}

/** A callback's outcome, written on the execution it told of (a one-off job's row, or an occurrence's). */
export interface CallbackOutcome {
  tenant: string;
  jobId: string;
  /** the execution it told of */
  executionId: string;
  oneOff: boolean;
  /** the callback's own execution id: its outcome lands only while the column tells of it */
  callbackId: string;
  /** JSON: StoredCallback[] */
  callbacks: string;
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
 * - recurring: an occurrence history row (insert or a reopened one's update); guard: attempts
 *   never go backwards.
 * - dead: a dead-letter row.
 * - schedules: next_run_at, fired and completion, only at the version the bucket holds.
 * - callbacks: a callback's outcome on the execution it told of (1 row each; none without callbacks);
 *   guard: the column still names that callback (a redriven execution's later outcome, with its
 *   own callback, is never overwritten by the earlier callback's late outcome).
 */
export async function writeOutcomes(
  db: Db,
  finished: FinishedExecution[],
  schedules: ScheduleProjection[],
  now: number,
  callbacks: CallbackOutcome[] = [],
): Promise<number> {
  const f = element<FinishedExecution>();
  const statements: BatchItem<"sqlite">[] = [];
  // a one-off job completes when its execution ends succeeded or dead while the job is still due
  // at the run time that execution was for (the job table's "complete")
  const completesOneOff = and(
    inArray(jobs.status, COMPLETE_FROM),
    inArray(
      f("status"),
      (["succeed", "kill", "poison"] as const).map((t) => TRANSITIONS[t].to),
    ),
    eq(jobs.nextRunAt, f("occurrenceAt")),
  );
  // the outcome columns a one-off job row and an occurrence row share, by their schema names
  const outcome = {
    attempts: f("attempts"),
    lastHttpStatus: f("lastHttpStatus"),
    lastError: f("lastError"),
    deadReason: f("deadReason"),
    finishedAt: f("finishedAt"),
    attemptLog: f("attemptLog"),
    callbacks: f("callbacks"),
  };
  for (const chunk of jsonChunks(finished.filter((e) => !e.recurring))) {
    statements.push(
      db
        .update(jobs)
        .set({
          runStatus: f("status"),
          ...outcome,
          status: sql`CASE WHEN ${completesOneOff} THEN ${COMPLETED} ELSE ${jobs.status} END`,
          updatedAt: sql`CASE WHEN ${completesOneOff} THEN ${now} ELSE ${jobs.updatedAt} END`,
        })
        .from(each(chunk))
        .where(and(eq(jobs.tenant, f("tenant")), eq(jobs.id, f("jobId")), lte(jobs.attempts, f("attempts")))),
    );
  }
  for (const chunk of jsonChunks(finished.filter((e) => e.recurring))) {
    statements.push(
      db
        .insert(occurrences)
        .select(
          db
            .select(
              insertRow({
                id: f("id"),
                tenant: f("tenant"),
                jobId: f("jobId"),
                dueAt: f("occurrenceAt"),
                occurrence: f("occurrence"),
                status: f("status"),
                ...outcome,
              }),
            )
            .from(each(chunk))
            .where(sql`true`), // ends the FROM before ON CONFLICT (see insertJobs)
        )
        .onConflictDoUpdate({
          target: [occurrences.tenant, occurrences.id],
          set: takeProposed(occurrences, ["status", ...(Object.keys(outcome) as (keyof typeof outcome)[])]),
          setWhere: lte(occurrences.attempts, proposed(occurrences.attempts)),
        }),
    );
  }
  for (const chunk of jsonChunks(finished.filter((e) => e.status === "dead"))) {
    statements.push(
      db
        .insert(deadLetters)
        .select(
          db
            .select(
              insertRow({
                tenant: f("tenant"),
                executionId: f("id"),
                jobId: f("jobId"),
                bucket: f("bucket"),
                dueAt: f("occurrenceAt"),
                occurrence: f("occurrence"),
                attempts: f("attempts"),
                lastHttpStatus: f("lastHttpStatus"),
                lastError: f("lastError"),
                deadReason: f("deadReason"),
                deadAt: f("finishedAt"),
                redriveAt: bound(null),
              }),
            )
            .from(each(chunk))
            .where(sql`true`), // ends the FROM before ON CONFLICT (see insertJobs)
        )
        .onConflictDoUpdate({
          target: [deadLetters.tenant, deadLetters.executionId],
          set: { ...takeProposed(deadLetters, ["attempts", "lastHttpStatus", "lastError", "deadReason", "deadAt"]), redriveAt: null },
        }),
    );
  }
  // a redriven execution that finished leaves the list even if its redrive was never acknowledged
  const redriven = finished.filter((e) => e.status !== "dead").map((e) => ({ tenant: e.tenant, id: e.id }));
  for (const chunk of jsonChunks(redriven)) statements.push(deleteRedriven(db, chunk, "id"));
  const s = element<ScheduleProjection>();
  const completesSchedule = and(s("completed"), inArray(jobs.status, COMPLETE_FROM));
  for (const chunk of jsonChunks(schedules)) {
    statements.push(
      db
        .update(jobs)
        .set({
          nextRunAt: sql`COALESCE(${s("nextRunAt")}, ${jobs.nextRunAt})`,
          fired: sql`MAX(${jobs.fired}, ${s("fired")})`,
          status: sql`CASE WHEN ${completesSchedule} THEN ${COMPLETED} ELSE ${jobs.status} END`,
          updatedAt: sql`CASE WHEN ${completesSchedule} THEN ${now} ELSE ${jobs.updatedAt} END`,
        })
        .from(each(chunk))
        .where(
          and(
            eq(jobs.tenant, s("tenant")),
            eq(jobs.id, s("jobId")),
            eq(jobs.version, s("version")),
            or(
              and(isNotNull(s("nextRunAt")), sql`${jobs.nextRunAt} IS NOT ${s("nextRunAt")}`),
              lt(jobs.fired, s("fired")),
              completesSchedule,
            ),
          ),
        ),
    );
  }
  for (const c of callbacks) {
    const names = (column: typeof jobs.callbacks | typeof occurrences.callbacks) =>
      sql`json_extract(${column}, '$[0].id') = ${c.callbackId}`;
    statements.push(
      c.oneOff
        ? db
            .update(jobs)
            .set({ callbacks: c.callbacks })
            .where(and(eq(jobs.tenant, c.tenant), eq(jobs.id, c.jobId), names(jobs.callbacks)))
        : db
            .update(occurrences)
            .set({ callbacks: c.callbacks })
            .where(and(eq(occurrences.tenant, c.tenant), eq(occurrences.id, c.executionId), names(occurrences.callbacks))),
    );
  }
  return rowsWritten(await batchRun(db, statements));
}

// ---------------------------------------------------------------------------------------------
// reads

export async function getJob(db: Db, tenant: string, id: string): Promise<JobRow | undefined> {
  const rows = await db
    .select()
    .from(jobs)
    .where(and(eq(jobs.tenant, tenant), eq(jobs.id, id)))
    .limit(1);
  return rows[0];
}

/**
 * getJobsByIds: a tenant's jobs among these ids (whole rows, spec included), the ids bound as one
 * JSON array per statement (a chunk under D1's 2 MB string limit), whatever their number.
 */
export async function getJobsByIds(db: Db, tenant: string, ids: string[]): Promise<JobRow[]> {
  if (ids.length === 0) return [];
  const statements = jsonChunks(ids).map((chunk) =>
    db
      .select()
      .from(jobs)
      .where(and(eq(jobs.tenant, tenant), inArray(jobs.id, valuesOf(chunk)))),
  );
  return (await batchAll(db, statements)).flat();
}

/**
 * Keys a filtered list examines per page and source, at most: filters that are not the range's
 * key are checked inside this many keys, newest first, so a page may come back short (even empty)
 * with a cursor, and no page reads a tenant's whole range. Rows read per page and source: at most
 * twice this (the filtered read, then the range's lowest key when the page came back short).
 */
export const SCAN_ROWS = 500;

/**
 * A page of a bounded range scan: `matching` reads up to limit + 1 rows passing the filters among
 * the first SCAN_ROWS keys of `range` (a subquery keyed by id); only a short answer reads the
 * range's extent (its lowest id, and whether it is SCAN_ROWS long).
 */
async function boundedScan<T>(
  db: Db,
  matching: PromiseLike<T[]>,
  range: Subquery & { id: SQLWrapper },
  keyOf: (row: T) => string,
  limit: number,
): Promise<Scan<T>> {
  const rows = await matching;
  if (rows.length > limit) return { rows, covered: keyOf(rows[limit]!) };
  const [extent] = await db.select({ lowest: sql<string | null>`min(${range.id})`, count: sql<number>`count(*)` }).from(range);
  return { rows, covered: extent && extent.count >= SCAN_ROWS ? extent.lowest : null };
}

/** `text` starts with `prefix` (case-sensitive; LIKE and GLOB would read % _ * ? as wildcards). */
function startsWith(text: SQL | AnySQLiteColumn, prefix: string): SQL {
  return sql`substr(${text}, 1, length(${prefix})) = ${prefix}`;
}

/** An HTTP target's URL in a job's spec JSON (null for a worker target). */
function targetUrl(spec: SQL | AnySQLiteColumn): SQL<string | null> {
  return sql<string | null>`json_extract(${spec}, '$.target.url')`;
}

/**
 * The first SCAN_ROWS jobs of a tenant newest first below `cursorId`: a range of the jobs key
 * (tenant, id), or with a label of job_labels' key (tenant, key, value, job id), each label row
 * joined to its job by key (two rows read a job).
 */
function jobRange(db: Db, tenant: string, label: { key: string; value: string } | undefined, cursorId: string | undefined) {
  return label
    ? db
        .select(getTableColumns(jobs))
        .from(jobLabels)
        .innerJoin(jobs, and(eq(jobs.tenant, jobLabels.tenant), eq(jobs.id, jobLabels.jobId)))
        .where(
          and(
            eq(jobLabels.tenant, tenant),
            eq(jobLabels.key, label.key),
            eq(jobLabels.value, label.value),
            cursorId ? lt(jobLabels.jobId, cursorId) : undefined,
          ),
        )
        .orderBy(desc(jobLabels.jobId))
        .limit(SCAN_ROWS)
        .as("scanned")
    : db
        .select()
        .from(jobs)
        .where(and(eq(jobs.tenant, tenant), cursorId ? lt(jobs.id, cursorId) : undefined))
        .orderBy(desc(jobs.id))
        .limit(SCAN_ROWS)
        .as("scanned");
}

export interface JobFilter {
  status?: JobState | undefined;
  label?: { key: string; value: string } | undefined;
  /** a prefix of the job's name */
  name?: string | undefined;
  /** a prefix of an HTTP target's URL */
  url?: string | undefined;
}

/**
 * listJobs: a tenant's jobs newest first (ids are time-sortable, so the key order is the creation
 * order), below `cursorId`. The range is the jobs key (tenant, id), or with a label job_labels' key
 * (tenant, key, value, job id), each label row joined to its job by key; status, name and url are
 * checked inside a bounded scan of it (SCAN_ROWS). Rows read per page: the rows examined (two per
 * label row), at most 2 × SCAN_ROWS (4 × with a label).
 */
export async function listJobs(
  db: Db,
  tenant: string,
  filter: JobFilter,
  cursorId: string | undefined,
  limit: number,
): Promise<Scan<JobRow>> {
  const { status, label, name, url } = filter;
  const range = jobRange(db, tenant, label, cursorId);
  const matching = db
    .select()
    .from(range)
    .where(
      and(
        status ? eq(range.status, status) : undefined,
        name !== undefined ? startsWith(range.name, name) : undefined,
        url !== undefined ? startsWith(targetUrl(range.spec), url) : undefined,
      ),
    )
    .orderBy(desc(range.id))
    .limit(limit + 1);
  return boundedScan(db, matching, range, (j) => j.id, limit);
}

export interface ExecutionFilter {
  status?: ExecutionState | undefined;
  label?: { key: string; value: string } | undefined;
  /** a prefix of the job's HTTP target URL */
  url?: string | undefined;
  httpStatus?: number | undefined;
  /** due time bounds, inclusive (epoch ms) */
  from?: number | undefined;
  to?: number | undefined;
}

/** A one-off job's execution state as D1 knows it, as viewOfOneOff (src/api/present.ts) shows it. */
function oneOffState(runStatus: AnySQLiteColumn, status: AnySQLiteColumn): SQL<ExecutionState> {
  return sql<ExecutionState>`CASE WHEN ${inArray(runStatus, TERMINAL_STATES)} THEN ${runStatus} WHEN ${status} = 'canceled' THEN 'canceled' ELSE 'pending' END`;
}

/**
 * listOneOffExecutions: one-off jobs (their single execution each) newest first, below
 * `cursorJobId`: the range of listJobs (the jobs key, or job_labels' with a label), every filter
 * checked inside its bounded scan (recurring jobs are examined and skipped). Rows read per page:
 * at most 2 × SCAN_ROWS (4 × with a label).
 */
export async function listOneOffExecutions(
  db: Db,
  tenant: string,
  filter: ExecutionFilter,
  cursorJobId: string | undefined,
  limit: number,
): Promise<Scan<JobRow>> {
  const { status, label, url, httpStatus, from, to } = filter;
  const range = jobRange(db, tenant, label, cursorJobId);
  // as viewOfOneOff shows it: its run time, or its creation when it has none
  const dueAt = sql<number>`COALESCE(${range.nextRunAt}, ${range.createdAt})`;
  const matching = db
    .select()
    .from(range)
    .where(
      and(
        isNull(range.cron),
        status ? eq(oneOffState(range.runStatus, range.status), status) : undefined,
        httpStatus !== undefined ? eq(range.lastHttpStatus, httpStatus) : undefined,
        url !== undefined ? startsWith(targetUrl(range.spec), url) : undefined,
        from !== undefined ? gte(dueAt, from) : undefined,
        to !== undefined ? lte(dueAt, to) : undefined,
      ),
    )
    .orderBy(desc(range.id))
    .limit(limit + 1);
  return boundedScan(db, matching, range, (j) => j.id, limit);
}

/**
 * listOccurrenceExecutions: finished occurrences of recurring jobs newest first, below `cursorId`.
 * An occurrence's id carries its due time, so the range is the table's key (tenant, id) with
 * from/to as key bounds, or with a jobId occurrences_job (tenant, job_id, due_at); status and
 * httpStatus are checked inside its bounded scan, label and url by one key lookup per row examined
 * (job_labels', jobs'). Rows read per page: at most 2 × SCAN_ROWS, plus one per row examined with
 * a label or url.
 */
export async function listOccurrenceExecutions(
  db: Db,
  tenant: string,
  filter: ExecutionFilter & { jobId?: string | undefined },
  cursorId: string | undefined,
  limit: number,
): Promise<Scan<OccurrenceRow>> {
  const { status, label, url, httpStatus, from, to, jobId } = filter;
  const below = cursorId === undefined ? undefined : lt(occurrences.id, cursorId);
  const range = (
    jobId !== undefined
      ? db
          .select()
          .from(occurrences)
          .where(
            and(
              eq(occurrences.tenant, tenant),
              eq(occurrences.jobId, jobId),
              from !== undefined ? gte(occurrences.dueAt, from) : undefined,
              to !== undefined ? lte(occurrences.dueAt, to) : undefined,
              // the index's bound: one job's ids are in due-time order
              cursorId === undefined ? undefined : lte(occurrences.dueAt, timeOfId(cursorId) ?? 0),
              below,
            ),
          )
          .orderBy(desc(occurrences.dueAt))
      : db
          .select()
          .from(occurrences)
          .where(
            and(
              eq(occurrences.tenant, tenant),
              from !== undefined ? gte(occurrences.id, executionIdFloor(from)) : undefined,
              to !== undefined ? lt(occurrences.id, executionIdFloor(to + 1)) : undefined,
              below,
            ),
          )
          .orderBy(desc(occurrences.id))
  )
    .limit(SCAN_ROWS)
    .as("scanned");
  const matching = db
    .select()
    .from(range)
    .where(
      and(
        status ? eq(range.status, status as TerminalState) : undefined,
        httpStatus !== undefined ? eq(range.lastHttpStatus, httpStatus) : undefined,
        label
          ? exists(
              db
                .select({ one: sql`1` })
                .from(jobLabels)
                .where(
                  and(
                    eq(jobLabels.tenant, tenant),
                    eq(jobLabels.key, label.key),
                    eq(jobLabels.value, label.value),
                    eq(jobLabels.jobId, range.jobId),
                  ),
                ),
            )
          : undefined,
        url !== undefined
          ? exists(
              db
                .select({ one: sql`1` })
                .from(jobs)
                .where(and(eq(jobs.tenant, tenant), eq(jobs.id, range.jobId), startsWith(targetUrl(jobs.spec), url))),
            )
          : undefined,
      ),
    )
    .orderBy(desc(range.id))
    .limit(limit + 1);
  return boundedScan(db, matching, range, (o) => o.id, limit);
}

export async function getOccurrence(db: Db, tenant: string, id: string): Promise<OccurrenceRow | undefined> {
  const rows = await db
    .select()
    .from(occurrences)
    .where(and(eq(occurrences.tenant, tenant), eq(occurrences.id, id)))
    .limit(1);
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
export async function listDead(
  db: Db,
  tenant: string,
  cursor: { deadAt: number; id: string } | undefined,
  limit: number,
  /** checked on the tenant's range, newest first: the rows it skips are read too */
  filter: { jobId?: string; deadReason?: string; redriving?: false } = {},
): Promise<DeadLetterRow[]> {
  const conditions = [eq(deadLetters.tenant, tenant)];
  if (filter.redriving === false) conditions.push(isNull(deadLetters.redriveAt));
  if (filter.jobId !== undefined) conditions.push(eq(deadLetters.jobId, filter.jobId));
  if (filter.deadReason !== undefined) conditions.push(eq(deadLetters.deadReason, filter.deadReason));
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
// flow-control keys

/**
 * registerFlowKey: lists a tenant's flow-control key, called by its FlowKey object. Writes one row
 * (and no index entry: WITHOUT ROWID) the first time, nothing after (ON CONFLICT DO NOTHING).
 */
export async function registerFlowKey(db: Db, tenant: string, key: string, now: number): Promise<void> {
  await db.insert(flowKeys).values({ tenant, key, createdAt: now }).onConflictDoNothing();
}

/** A tenant's flow-control keys in key order, at most `limit` (rows read: about as many as returned). */
export async function listFlowKeys(db: Db, tenant: string, limit: number): Promise<string[]> {
  const rows = await db.select({ key: flowKeys.key }).from(flowKeys).where(eq(flowKeys.tenant, tenant)).orderBy(flowKeys.key).limit(limit);
  return rows.map((r) => r.key);
}

// ---------------------------------------------------------------------------------------------
// retention

/** A finished job's columns the archive keeps (not its spec: its request, up to 128 KiB, is not history). */
const ARCHIVED_JOB = {
  tenant: jobs.tenant,
  id: jobs.id,
  name: jobs.name,
  status: jobs.status,
  cron: jobs.cron,
  nextRunAt: jobs.nextRunAt,
  createdAt: jobs.createdAt,
  updatedAt: jobs.updatedAt,
  runStatus: jobs.runStatus,
  attempts: jobs.attempts,
  lastHttpStatus: jobs.lastHttpStatus,
  lastError: jobs.lastError,
  deadReason: jobs.deadReason,
  finishedAt: jobs.finishedAt,
  attemptLog: jobs.attemptLog,
  labels: jobs.labels,
};
export type ArchivedJobRow = Pick<JobRow, keyof typeof ARCHIVED_JOB>;

/** A page of history leaving D1 with an archive bound: its finished jobs and occurrences, as read. */
export interface HistoryPage {
  /** finished jobs (a one-off one is its execution; a recurring one's executions are its occurrences) */
  jobs: ArchivedJobRow[];
  /** finished occurrences, with their job's name and labels (null once the job itself has gone) */
  occurrences: (OccurrenceRow & { jobName: string | null; labels: string | null })[];
}

/**
 * What a purge page with an archive reads at most of its jobs' and occurrences' attempt logs,
 * errors, labels, names and callbacks together (UTF-8 bytes; the jobs first, the occurrences in
 * what is left, at least one of each). The page is held in the scan's invocation with what is made
 * of it (the archive lines, their text, its gzip: several times the page), a few shards at a time
 * (scanner/scan.ts PURGE_SHARDS_AT_ONCE), in an isolate of 128 MB. The largest history row is
 * about 91 KB (20 attempts of a 1,024-character error and a 256-character response, labels and a
 * name, in 3-byte characters), so a page holds at least about 44 of them, and about 4,400 typical
 * ones (~600 bytes each, plus ROW_BYTES): near PURGE_PAGE's 5,000.
 */
export const ARCHIVE_PAGE_BYTES = 4_000_000;
/** a row's bytes beyond the variable columns, for a page's budget */
const ROW_BYTES = 300;

/**
 * purgeHistory: one page of finished jobs (per bucket, by the due-time index), occurrence history,
 * dead letters and idempotency keys older than their cutoffs; with `keepDeadLetters` (the
 * watermark's purge) no dead letter and no dead one-off job (its redrive needs the row). Returns
 * the rows deleted, whether a statement filled its page (more remain), the rows written, and the
 * database's size after it (meta.size_after, bytes). Without an archive: one batch of deletes,
 * each over a key subquery with a LIMIT.
 */
export async function purgeHistory(
  db: Db,
  buckets: number,
  historyCutoffAt: number,
  idempotencyCutoffAt: number,
  limit: number,
  { keepDeadLetters = false }: { keepDeadLetters?: boolean } = {},
): Promise<PurgedPage> {
  const perBucket = Math.max(1, Math.ceil(limit / buckets));
  // SQLite's DELETE ... LIMIT is a compile-time option: each page is a key subquery with a LIMIT
  const finishedJobs = (b: number) =>
    db
      .select({ tenant: jobs.tenant, id: jobs.id })
      .from(jobs)
      .where(and(eq(jobs.bucket, b), finishedJobBefore(historyCutoffAt, keepDeadLetters)))
      .limit(perBucket);
  // a purged job's labels first: the same page of finished jobs (the same query on the same rows)
  const statements: BatchItem<"sqlite">[] = Array.from({ length: buckets }, (_, b) => [
    // by each label row's full key (its labels JSON): the table's key has no (tenant, job) prefix
    db.delete(jobLabels).where(inArray(LABEL_KEY, labelRowsWhere(db, sql`(${JOB.tenant}, ${JOB.id}) IN ${finishedJobs(b)}`))),
    db.delete(jobs).where(inArray(sql`(${jobs.tenant}, ${jobs.id})`, finishedJobs(b))),
  ]).flat();
  const oldOccurrences = db
    .select({ tenant: occurrences.tenant, id: occurrences.id })
    .from(occurrences)
    .where(lt(occurrences.finishedAt, historyCutoffAt))
    .limit(limit);
  statements.push(
    db.delete(occurrences).where(inArray(sql`(${occurrences.tenant}, ${occurrences.id})`, oldOccurrences)),
    ...retentionOnly(db, historyCutoffAt, idempotencyCutoffAt, limit, keepDeadLetters),
  );
  const mark = purgeMark(db, historyCutoffAt, idempotencyCutoffAt);
  const results = await batchRun(db, mark ? [...statements, mark] : statements);
  const deletes = results.slice(0, statements.length);
  // label rows do not count as deleted items (a job's labels go with it); "more" looks at the jobs
  const counted = [...deletes.filter((_, i) => i < buckets * 2 && i % 2 === 1), ...deletes.slice(buckets * 2)];
  const limits = [...Array.from({ length: buckets }, () => perBucket), ...deletes.slice(buckets * 2).map(() => limit)];
  return {
    deleted: counted.reduce((n, r) => n + (r.meta.changes ?? 0), 0),
    more: counted.some((r, i) => (r.meta.changes ?? 0) >= limits[i]!),
    rowsWritten: rowsWritten(results),
    sizeAfter: results.at(-1)?.meta.size_after ?? null,
  };
}

export interface PurgedPage {
  deleted: number;
  more: boolean;
  rowsWritten: number;
  sizeAfter: number | null;
}

/**
 * purgeArchivedHistory: purgeHistory's page with an archive. The page's keys are chosen in a fixed
 * order (due time, then key; occurrences by finish) and cut at ARCHIVE_PAGE_BYTES, so a retry reads
 * the same page; its rows are read by key (without the job's spec), handed to `archive`, and
 * deleted only once it resolved: by key and only if still finished and as old (a redrive or a new
 * outcome in between keeps the row, and a later page archives it again). When `archive` rejects,
 * no job or occurrence is deleted (dead letters and idempotency keys past their retention still
 * are), and the rejection is rethrown. Rows read: about 3 per execution (keys, rows, the delete's
 * lookups).
 */
export async function purgeArchivedHistory(
  db: Db,
  buckets: number,
  historyCutoffAt: number,
  idempotencyCutoffAt: number,
  limit: number,
  archive: (page: HistoryPage) => Promise<void>,
  { keepDeadLetters = false, pageBytes = ARCHIVE_PAGE_BYTES }: { keepDeadLetters?: boolean; pageBytes?: number } = {},
): Promise<PurgedPage> {
  const perBucket = Math.max(1, Math.ceil(limit / buckets));
  const bytes = (...columns: AnySQLiteColumn[]) =>
    sql<number>`${sql.join(
      columns.map((c) => sql`ifnull(length(CAST(${c} AS BLOB)), 0)`),
      sql` + `,
    )}`;
  const keyed = (await db.batch([
    ...Array.from({ length: buckets }, (_, b) =>
      db
        .select({ tenant: jobs.tenant, id: jobs.id, bytes: bytes(jobs.attemptLog, jobs.lastError, jobs.labels, jobs.name) })
        .from(jobs)
        .where(and(eq(jobs.bucket, b), finishedJobBefore(historyCutoffAt, keepDeadLetters)))
        .orderBy(jobs.nextRunAt, jobs.tenant, jobs.id)
        .limit(perBucket),
    ),
    db
      .select({
        tenant: occurrences.tenant,
        id: occurrences.id,
        bytes: bytes(occurrences.attemptLog, occurrences.lastError, occurrences.callbacks),
      })
      .from(occurrences)
      .where(lt(occurrences.finishedAt, historyCutoffAt))
      .orderBy(occurrences.finishedAt, occurrences.tenant, occurrences.id)
      .limit(limit),
  ] as unknown as [BatchItem<"sqlite">])) as { tenant: string; id: string; bytes: number }[][];
  const jobKeys = withinBytes(keyed.slice(0, buckets).flat(), pageBytes);
  const occurrenceKeys = withinBytes(keyed.at(-1)!, pageBytes - jobKeys.bytes);
  const more =
    keyed.slice(0, buckets).some((rows) => rows.length >= perBucket) || keyed.at(-1)!.length >= limit || jobKeys.cut || occurrenceKeys.cut;
  const jobJson = JSON.stringify(jobKeys.keys.map((k) => [k.tenant, k.id]));
  const occurrenceJson = JSON.stringify(occurrenceKeys.keys.map((k) => [k.tenant, k.id]));
  const tail = retentionOnly(db, historyCutoffAt, idempotencyCutoffAt, limit, keepDeadLetters);
  if (jobKeys.keys.length > 0 || occurrenceKeys.keys.length > 0) {
    const [jobRows, occurrenceRows] = await db.batch([
      db
        .select(ARCHIVED_JOB)
        .from(jobs)
        .where(sql`(${jobs.tenant}, ${jobs.id}) IN ${keysIn(jobJson)}`),
      db
        .select({ ...getTableColumns(occurrences), jobName: jobs.name, labels: jobs.labels })
        .from(occurrences)
        .leftJoin(jobs, and(eq(jobs.tenant, occurrences.tenant), eq(jobs.id, occurrences.jobId)))
        .where(sql`(${occurrences.tenant}, ${occurrences.id}) IN ${keysIn(occurrenceJson)}`),
    ]);
    try {
      await archive({ jobs: jobRows, occurrences: occurrenceRows });
    } catch (error) {
      await batchRun(db, tail);
      throw error;
    }
  }
  // by key, and only rows still finished and as old as when read (`+`: by the key, not the due-time index)
  const stillFinished = db
    .select({ tenant: jobs.tenant, id: jobs.id })
    .from(jobs)
    .where(
      and(
        sql`(${jobs.tenant}, ${jobs.id}) IN ${keysIn(jobJson)}`,
        inArray(jobs.status, FINISHED),
        sql`+${jobs.nextRunAt} < ${historyCutoffAt}`,
        sql`+${jobs.updatedAt} < ${historyCutoffAt}`,
        keepDeadLetters ? sql`${jobs.runStatus} IS NOT ${DEAD}` : undefined,
      ),
    );
  const deleting: BatchItem<"sqlite">[] = [
    db.delete(jobLabels).where(inArray(LABEL_KEY, labelRowsWhere(db, sql`(${JOB.tenant}, ${JOB.id}) IN ${stillFinished}`))),
    db.delete(jobs).where(inArray(sql`(${jobs.tenant}, ${jobs.id})`, stillFinished)),
    db
      .delete(occurrences)
      .where(
        and(
          sql`(${occurrences.tenant}, ${occurrences.id}) IN ${keysIn(occurrenceJson)}`,
          sql`+${occurrences.finishedAt} < ${historyCutoffAt}`,
        ),
      ),
    ...tail,
  ];
  const mark = purgeMark(db, historyCutoffAt, idempotencyCutoffAt);
  const results = await batchRun(db, mark ? [...deleting, mark] : deleting);
  const deletes = results.slice(0, deleting.length);
  return {
    // label rows do not count as deleted items (a job's labels go with it)
    deleted: deletes.slice(1).reduce((n, r) => n + (r.meta.changes ?? 0), 0),
    more: more || deletes.slice(3).some((r) => (r.meta.changes ?? 0) >= limit),
    rowsWritten: rowsWritten(results),
    sizeAfter: results.at(-1)?.meta.size_after ?? null,
  };
}

/** Keys in order while their bytes fit `budget` (at least one); `cut` when some were left for the next page. */
function withinBytes<T extends { bytes: number }>(keys: T[], budget: number): { keys: T[]; cut: boolean; bytes: number } {
  let total = 0;
  for (const [i, k] of keys.entries()) {
    if (total + k.bytes + ROW_BYTES > budget && i > 0) return { keys: keys.slice(0, i), cut: true, bytes: total };
    total += k.bytes + ROW_BYTES;
  }
  return { keys, cut: false, bytes: total };
}

/**
 * A finished job whose due time and last change are before the cutoff. `keepDeadLetters` (the
 * watermark's purge, which keeps dead letters): not a dead one-off job, whose dead letter's redrive
 * needs its row (a listed dead letter is redrivable); the retention purge takes both together.
 */
function finishedJobBefore(cutoffAt: number, keepDeadLetters: boolean): SQL {
  return and(
    inArray(jobs.status, FINISHED),
    lt(jobs.nextRunAt, cutoffAt),
    lt(jobs.updatedAt, cutoffAt),
    keepDeadLetters ? sql`${jobs.runStatus} IS NOT ${DEAD}` : undefined,
  )!;
}

/** The purge of what is not an execution: dead letters (unless kept) and idempotency keys past their retention. */
function retentionOnly(db: Db, historyCutoffAt: number, idempotencyCutoffAt: number, limit: number, keepDeadLetters: boolean) {
  const oldDeadLetters = db
    .select({ tenant: deadLetters.tenant, executionId: deadLetters.executionId })
    .from(deadLetters)
    .where(and(lt(deadLetters.deadAt, historyCutoffAt), isNull(deadLetters.redriveAt)))
    .limit(limit);
  const rowid = sql<number>`rowid`; // idempotency_keys is a rowid table (schema.ts withoutRowid)
  const oldKeys = db.select({ rowid }).from(idempotencyKeys).where(lt(idempotencyKeys.createdAt, idempotencyCutoffAt)).limit(limit);
  return [
    ...(keepDeadLetters
      ? []
      : [db.delete(deadLetters).where(inArray(sql`(${deadLetters.tenant}, ${deadLetters.executionId})`, oldDeadLetters))]),
    db.delete(idempotencyKeys).where(inArray(rowid, oldKeys)),
  ];
}

/** scheduler_meta's key of the purge's mark (purgeMark), in each shard. */
const HISTORY_PURGED_BEFORE = "history_purged_before";

/**
 * The purge's mark, for a page whose cutoff is within the dedupe window (the watermark's, or a
 * HISTORY_RETENTION_MS shorter than IDEMPOTENCY_WINDOW_MS): the newest cutoff of a purge that may
 * have deleted a job whose idempotency key still replays it. A job claimed at or after the mark was
 * never purged (the purge takes only jobs last changed before its cutoff, and a job is created when
 * its key is claimed), so a keyed create that finds no job claimed after it stores the job its
 * failed insert lost, and one claimed before it never runs again (api/create.ts). Written in the
 * batch of the page's deletes (a D1 batch is one transaction: d1/worker-api/d1-database, batch),
 * raised only: 1 row written when it rises, none otherwise; no statement when the cutoff is older
 * than the window (the default 30-day retention never writes it).
 */
function purgeMark(db: Db, historyCutoffAt: number, idempotencyCutoffAt: number) {
  if (historyCutoffAt <= idempotencyCutoffAt) return undefined;
  return db
    .insert(schedulerMeta)
    .values({ key: HISTORY_PURGED_BEFORE, value: String(historyCutoffAt) })
    .onConflictDoUpdate({
      target: schedulerMeta.key,
      set: { value: String(historyCutoffAt) },
      setWhere: sql`CAST(${schedulerMeta.value} AS INTEGER) < ${historyCutoffAt}`,
    });
}

/** The shard's purge mark (purgeMark): history last changed before it may be gone; 0 when no purge reached into the dedupe window. */
export async function historyPurgedBefore(db: Db): Promise<number> {
  const [row] = await db.select({ value: schedulerMeta.value }).from(schedulerMeta).where(eq(schedulerMeta.key, HISTORY_PURGED_BEFORE));
  return row ? Number(row.value) : 0;
}

/** `(SELECT tenant, id ...)` of a JSON array of [tenant, id] pairs: keys bound as one parameter. */
function keysIn(json: string): SQL {
  return sql`(SELECT json_extract(purged.value, '$[0]'), json_extract(purged.value, '$[1]') FROM json_each(${json}) AS purged)`;
}

/** how many of a bucket's earliest-due jobs the oldest-history gauge looks at */
const OLDEST_SCAN_ROWS = 1000;

/**
 * A shard's size (meta.size_after) and the oldest history it holds: the earliest due time of a
 * finished job or finish of an occurrence (ms; null with none). One statement: the occurrence
 * index's first entry, and the first finished job among each bucket's OLDEST_SCAN_ROWS
 * earliest-due (the due-time index): rows read about one a bucket, at most OLDEST_SCAN_ROWS where
 * live jobs are due before every finished one (then that bucket's history is newer than those).
 */
export async function shardHistory(db: Db, buckets: number): Promise<{ bytes: number | null; oldestHistoryAt: number | null }> {
  const statuses = sql.raw(FINISHED.map((s) => `'${s}'`).join(","));
  const result = (await db.run(sql`
    WITH RECURSIVE b(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM b WHERE k + 1 < ${buckets})
    SELECT min(at) AS oldest FROM (
      SELECT min(${occurrences.finishedAt}) AS at FROM ${occurrences}
      UNION ALL
      SELECT (
        SELECT min(due) FROM (
          SELECT ${jobs.nextRunAt} AS due, ${jobs.status} AS status FROM ${jobs}
          WHERE ${jobs.bucket} = b.k AND ${jobs.nextRunAt} IS NOT NULL
          ORDER BY ${jobs.nextRunAt} LIMIT ${OLDEST_SCAN_ROWS}
        ) WHERE status IN (${statuses})
      ) FROM b
    )`)) as unknown as D1Result<{ oldest: number | null }>;
  return { bytes: result.meta.size_after ?? null, oldestHistoryAt: result.results[0]?.oldest ?? null };
}

/** The highest bucket any job names (a lowered BUCKETS setting must not strand a bucket's jobs). */
export async function highestBucket(db: Db): Promise<number> {
  const [highest] = await db.select({ bucket: max(jobs.bucket) }).from(jobs);
  return highest?.bucket ?? -1;
}

// ---------------------------------------------------------------------------------------------
// shards (db/shards.ts)

/** The most shards the deployment has had (0 before any was recorded), from shard 0. */
export async function mostShards(db: Db): Promise<number> {
  const [row] = await db.select({ value: schedulerMeta.value }).from(schedulerMeta).where(eq(schedulerMeta.key, "shards"));
  return row ? Number(row.value) : 0;
}

/**
 * recordShardCount: shard 0 remembers the most shards the deployment has had (`count` if more).
 * Writes 1 row when it grows, else 0. Returns the most before this call (0 the first time).
 */
export async function recordShardCount(db: Db, count: number): Promise<number> {
  const most = await mostShards(db);
  if (count > most) {
    await db
      .insert(schedulerMeta)
      .values({ key: "shards", value: String(count) })
      .onConflictDoUpdate({
        target: schedulerMeta.key,
        set: { value: String(count) },
        setWhere: sql`CAST(${schedulerMeta.value} AS INTEGER) < ${count}`,
      });
  }
  return most;
}
