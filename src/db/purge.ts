/**
 * The scan's purge (scanner/scan.ts): pages of history past its retention, or past the watermark
 * (history the shard must shed to keep room: db/shards.ts), leave D1. Without an archive, here;
 * with one, purge-archived.ts, which shares these statements.
 */
import { and, eq, inArray, isNull, lt, type SQL, type SQLWrapper, sql } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import type { ExecutionState, JobState } from "../core/lifecycle";
import { deleteLabelRows, JOB, labelRowsWhere } from "./job-labels";
import { batchRun, type Db, rowsWritten } from "./kit";
import { purgeMark } from "./purge-mark";
import { deadLetters, idempotencyKeys, jobs, occurrences } from "./schema";

/** A job's states after which its row is history (the purge's). */
export const FINISHED: readonly JobState[] = ["completed", "canceled"];
/** A dead execution's state (a one-off job's run_status): its dead letter waits for a redrive. */
export const DEAD: ExecutionState = "dead";

export interface PurgedPage {
  deleted: number;
  more: boolean;
  rowsWritten: number;
  sizeAfter: number | null;
}

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
    deleteJobLabels(db, finishedJobs(b)),
    deleteJobs(db, finishedJobs(b)),
  ]).flat();
  const oldOccurrences = db
    .select({ tenant: occurrences.tenant, id: occurrences.id })
    .from(occurrences)
    .where(lt(occurrences.finishedAt, historyCutoffAt))
    .limit(limit);
  const deleteOldOccurrences = db.delete(occurrences).where(inArray(sql`(${occurrences.tenant}, ${occurrences.id})`, oldOccurrences));
  statements.push(deleteOldOccurrences, ...retentionOnly(db, historyCutoffAt, idempotencyCutoffAt, limit, keepDeadLetters));
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

/** deleteJobLabels: the label rows of the jobs `keys` (tenant, id) selects, by each row's full key (its labels JSON). */
export function deleteJobLabels(db: Db, keys: SQLWrapper) {
  return deleteLabelRows(db, labelRowsWhere(db, sql`(${JOB.tenant}, ${JOB.id}) IN ${keys}`));
}

/** deleteJobs: the jobs `keys` (tenant, id) selects; their label rows go first (deleteJobLabels). */
export function deleteJobs(db: Db, keys: SQLWrapper) {
  return db.delete(jobs).where(inArray(sql`(${jobs.tenant}, ${jobs.id})`, keys));
}

/**
 * A finished job whose due time and last change are before the cutoff. `keepDeadLetters` (the
 * watermark's purge, which keeps dead letters): not a dead one-off job, whose dead letter's redrive
 * needs its row (a listed dead letter is redrivable); the retention purge takes both together.
 */
export function finishedJobBefore(cutoffAt: number, keepDeadLetters: boolean): SQL {
  return and(
    inArray(jobs.status, FINISHED),
    lt(jobs.nextRunAt, cutoffAt),
    lt(jobs.updatedAt, cutoffAt),
    keepDeadLetters ? sql`${jobs.runStatus} IS NOT ${DEAD}` : undefined,
  )!;
}

/** retentionOnly: the purge of what is not an execution: dead letters (unless kept) and idempotency keys past their retention. */
export function retentionOnly(db: Db, historyCutoffAt: number, idempotencyCutoffAt: number, limit: number, keepDeadLetters: boolean) {
  const oldDeadLetters = db
    .select({ tenant: deadLetters.tenant, executionId: deadLetters.executionId })
    .from(deadLetters)
    .where(and(lt(deadLetters.deadAt, historyCutoffAt), isNull(deadLetters.redriveAt)))
    .limit(limit);
  const rowid = sql<number>`rowid`; // idempotency_keys is a rowid table (schema.ts withoutRowid)
  const oldKeys = db.select({ rowid }).from(idempotencyKeys).where(lt(idempotencyKeys.createdAt, idempotencyCutoffAt)).limit(limit);
  const deleteOldDeadLetters = db
    .delete(deadLetters)
    .where(inArray(sql`(${deadLetters.tenant}, ${deadLetters.executionId})`, oldDeadLetters));
  const deleteOldKeys = db.delete(idempotencyKeys).where(inArray(rowid, oldKeys));
  return [...(keepDeadLetters ? [] : [deleteOldDeadLetters]), deleteOldKeys];
}
