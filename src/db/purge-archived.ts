/**
 * The scan's purge with an archive bound (scanner/scan.ts, archive/archive.ts): a page of history
 * is read, handed to the archive, and deleted only once the archive took it.
 */
import { and, eq, getTableColumns, inArray, lt, type SQL, sql } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import type { AnySQLiteColumn } from "drizzle-orm/sqlite-core";
import { batchRun, type Db, ROW_BYTES, rowsWritten } from "./kit";
import { DEAD, deleteJobLabels, deleteJobs, FINISHED, finishedJobBefore, type PurgedPage, retentionOnly } from "./purge";
import { purgeMark } from "./purge-mark";
import { type JobRow, jobs, type OccurrenceRow, occurrences } from "./schema";

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
  const keyed = (await db.batch([
    ...Array.from({ length: buckets }, (_, b) => finishedJobKeys(db, b, historyCutoffAt, keepDeadLetters, perBucket)),
    oldOccurrenceKeys(db, historyCutoffAt, limit),
  ] as unknown as [BatchItem<"sqlite">])) as { tenant: string; id: string; bytes: number }[][];
  const jobKeys = withinBytes(keyed.slice(0, buckets).flat(), pageBytes);
  const occurrenceKeys = withinBytes(keyed.at(-1)!, pageBytes - jobKeys.bytes);
  const more =
    keyed.slice(0, buckets).some((rows) => rows.length >= perBucket) || keyed.at(-1)!.length >= limit || jobKeys.cut || occurrenceKeys.cut;
  const jobJson = JSON.stringify(jobKeys.keys.map((k) => [k.tenant, k.id]));
  const occurrenceJson = JSON.stringify(occurrenceKeys.keys.map((k) => [k.tenant, k.id]));
  const tail = retentionOnly(db, historyCutoffAt, idempotencyCutoffAt, limit, keepDeadLetters);
  if (jobKeys.keys.length > 0 || occurrenceKeys.keys.length > 0) {
    const [jobRows, occurrenceRows] = await db.batch([archivedJobsIn(db, jobJson), archivedOccurrencesIn(db, occurrenceJson)]);
    try {
      await archive({ jobs: jobRows, occurrences: occurrenceRows });
    } catch (error) {
      await batchRun(db, tail);
      throw error;
    }
  }
  const stillFinished = stillFinishedIn(db, jobJson, historyCutoffAt, keepDeadLetters);
  const deleting: BatchItem<"sqlite">[] = [
    deleteJobLabels(db, stillFinished),
    deleteJobs(db, stillFinished),
    deleteOccurrencesStillOld(db, occurrenceJson, historyCutoffAt),
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

/** The UTF-8 bytes of these columns together (null counts 0). */
function bytesOf(...columns: AnySQLiteColumn[]): SQL<number> {
  return sql<number>`${sql.join(
    columns.map((c) => sql`ifnull(length(CAST(${c} AS BLOB)), 0)`),
    sql` + `,
  )}`;
}

/** finishedJobKeys: a bucket's finished jobs before the cutoff in due-time order, at most `limit`, with their history's bytes. */
function finishedJobKeys(db: Db, bucket: number, historyCutoffAt: number, keepDeadLetters: boolean, limit: number) {
  return db
    .select({ tenant: jobs.tenant, id: jobs.id, bytes: bytesOf(jobs.attemptLog, jobs.lastError, jobs.labels, jobs.name) })
    .from(jobs)
    .where(and(eq(jobs.bucket, bucket), finishedJobBefore(historyCutoffAt, keepDeadLetters)))
    .orderBy(jobs.nextRunAt, jobs.tenant, jobs.id)
    .limit(limit);
}

/** oldOccurrenceKeys: occurrences finished before the cutoff in finish order, at most `limit`, with their bytes. */
function oldOccurrenceKeys(db: Db, historyCutoffAt: number, limit: number) {
  return db
    .select({
      tenant: occurrences.tenant,
      id: occurrences.id,
      bytes: bytesOf(occurrences.attemptLog, occurrences.lastError, occurrences.callbacks),
    })
    .from(occurrences)
    .where(lt(occurrences.finishedAt, historyCutoffAt))
    .orderBy(occurrences.finishedAt, occurrences.tenant, occurrences.id)
    .limit(limit);
}

/** archivedJobsIn: the jobs of the page's keys, as the archive keeps them. */
function archivedJobsIn(db: Db, jobJson: string) {
  return db
    .select(ARCHIVED_JOB)
    .from(jobs)
    .where(sql`(${jobs.tenant}, ${jobs.id}) IN ${keysIn(jobJson)}`);
}

/** archivedOccurrencesIn: the occurrences of the page's keys, with their job's name and labels. */
function archivedOccurrencesIn(db: Db, occurrenceJson: string) {
  return db
    .select({ ...getTableColumns(occurrences), jobName: jobs.name, labels: jobs.labels })
    .from(occurrences)
    .leftJoin(jobs, and(eq(jobs.tenant, occurrences.tenant), eq(jobs.id, occurrences.jobId)))
    .where(sql`(${occurrences.tenant}, ${occurrences.id}) IN ${keysIn(occurrenceJson)}`);
}

/** stillFinishedIn: the page's jobs by key, only those still finished and as old as when read (`+`: by the key, not the due-time index). */
function stillFinishedIn(db: Db, jobJson: string, historyCutoffAt: number, keepDeadLetters: boolean) {
  return db
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
}

/** deleteOccurrencesStillOld: the page's occurrences by key, only those still finished before the cutoff. */
function deleteOccurrencesStillOld(db: Db, occurrenceJson: string, historyCutoffAt: number) {
  return db
    .delete(occurrences)
    .where(
      and(
        sql`(${occurrences.tenant}, ${occurrences.id}) IN ${keysIn(occurrenceJson)}`,
        sql`+${occurrences.finishedAt} < ${historyCutoffAt}`,
      ),
    );
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

/** `(SELECT tenant, id ...)` of a JSON array of [tenant, id] pairs: keys bound as one parameter. */
function keysIn(json: string): SQL {
  return sql`(SELECT json_extract(purged.value, '$[0]'), json_extract(purged.value, '$[1]') FROM json_each(${json}) AS purged)`;
}
