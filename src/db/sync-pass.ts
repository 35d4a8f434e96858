/**
 * The bucket's sync pass (bucket/bucket.ts sync): reads a bucket's jobs due within the horizon,
 * its changes not yet acknowledged and its pending redrives, in pages cut by count and by bytes;
 * then acknowledges the versions it holds (markSynced, the bucket's write).
 */
import { and, eq, isNotNull, lte, type SQL, sql } from "drizzle-orm";
import type { JobDefinition, RedriveOrder } from "../protocol/bucket";
import { DEFINITION, definitionOf } from "./job-definition";
import { batchRun, type Db, each, element, jsonChunks, ROW_BYTES, rowsWritten } from "./kit";
import { deadLetters, jobs, occurrences } from "./schema";

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
