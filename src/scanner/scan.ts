/**
 * The cron-trigger scan, the sync pass: every bucket pulls from D1 its jobs due before now +
 * lookahead (overdue included), the changes it has not acknowledged and the redrives on their
 * way, and re-arms its alarm; so a failed hand-off or change, a far-future job or a dropped
 * alarm heals within one scan period. Then old history leaves D1.
 */

import { type ArchiveWrite, type LeavingExecution, writeArchive } from "../archive/archive";
import { type Config, configOf } from "../config";
import type { Db } from "../db/kit";
import { type PurgedPage, purgeHistory } from "../db/purge";
import { type HistoryPage, purgeArchivedHistory } from "../db/purge-archived";
import { checkShardCount, highestBucketOfAll, shardsOf } from "../db/shards";
import { bucketObject } from "../placement";
import { viewOfOccurrence, viewOfOneOff } from "../use-cases/present";

const CONCURRENT_BUCKETS = 6;
const PURGE_PAGE = 5000;
/** the purge runs page by page until caught up or this much time has passed (the next scan goes on), every shard's together */
const PURGE_BUDGET_MS = 20_000;
/**
 * Shards whose history is archived at once. Each holds a page (db/purge-archived.ts ARCHIVE_PAGE_BYTES)
 * and what is made of it in this invocation's isolate (128 MB): two at a time over three shards of
 * the largest history took the isolate's live heap from 6.4 to 23 MiB (scripts/heap-peak.mjs
 * purge; every shard at once with 16 MB pages took it to 334 MiB). Two overlap one shard's D1 and
 * R2 waits with another's work.
 */
export const PURGE_SHARDS_AT_ONCE = 2;
/** the watermark purge halves the history a shard keeps, round by round, down to this */
const MIN_HISTORY_KEPT_MS = 60_000;

export interface ScanReport {
  pulled: number;
  failedBuckets: number[];
  /** D1 shards a bucket could not sync with, or whose history could not be purged */
  failedShards: number[];
  /** history rows deleted (finished jobs, occurrences, dead letters, idempotency keys) */
  purged: number;
  /** of those, deleted before HISTORY_RETENTION_MS because a shard was above HISTORY_MAX_BYTES */
  trimmed: number;
  /** what went to the archive (ARCHIVE bound) before it left D1 */
  archived: ArchiveWrite;
  /** shards whose purge waits because an archive write failed (retried at the next scan) */
  archiveFailedShards: number[];
  /** why nothing was done (fewer shards bound than the deployment has had) */
  refused?: string;
}

export async function scan(env: Env, now: number): Promise<ScanReport> {
  const config = configOf(env);
  const shards = shardsOf(env);
  // fewer shards than the deployment has had: nothing is synced until they are bound again
  try {
    await checkShardCount(shards);
  } catch (error) {
    console.error("scan refused", error);
    return {
      pulled: 0,
      failedBuckets: [],
      failedShards: [],
      purged: 0,
      trimmed: 0,
      archived: nothingArchived(),
      archiveFailedShards: [],
      refused: String(error),
    };
  }
  // every bucket that holds a job, even if BUCKETS was lowered since
  const buckets = Math.max(config.BUCKETS, (await highestBucketOfAll(env).catch(() => -1)) + 1);
  let pulled = 0;
  const failedBuckets: number[] = [];
  const failedShards = new Set<number>();
  let next = 0;
  const worker = async () => {
    while (next < buckets) {
      const bucket = next++;
      try {
        const result = await bucketObject(env, bucket).pullWindow(bucket);
        pulled += result.pulled;
        for (const shard of result.failedShards) failedShards.add(shard);
      } catch (error) {
        console.error(`scan of bucket ${bucket} failed`, error);
        failedBuckets.push(bucket);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(CONCURRENT_BUCKETS, buckets) }, worker));
  const budgetEndsAt = Date.now() + PURGE_BUDGET_MS;
  // with an archive, each page's rows and the objects made of them are held in this invocation:
  // PURGE_SHARDS_AT_ONCE shards at a time bound its peak whatever the shards; without one, a page is
  // deletes that return nothing, and every shard goes at once
  const atOnce = env.ARCHIVE ? Math.min(PURGE_SHARDS_AT_ONCE, shards.count) : shards.count;
  // each shard's share of the budget, so one far behind does not starve those after it (at least one page each)
  const shareMs = (PURGE_BUDGET_MS * atOnce) / shards.count;
  const done: Awaited<ReturnType<typeof purgeShard>>[] = [];
  let nextShard = 0;
  const purgeWorker = async () => {
    while (nextShard < shards.count) {
      const shard = shards.all[nextShard++]!;
      done[shard.index] = await purgeShard(shard.db, buckets, config, now, Math.min(budgetEndsAt, Date.now() + shareMs), env.ARCHIVE).catch(
        (error: unknown) => {
          console.error(`history purge of D1 shard ${shard.index} failed`, error);
          failedShards.add(shard.index);
          return { purged: 0, trimmed: 0, rowsWritten: 0, archived: nothingArchived(), archiveFailed: false };
        },
      );
    }
  };
  await Promise.all(Array.from({ length: atOnce }, purgeWorker));
  const archived = {
    objects: done.reduce((n, d) => n + d.archived.objects, 0),
    bytes: done.reduce((n, d) => n + d.archived.bytes, 0),
    executions: done.reduce((n, d) => n + d.archived.executions, 0),
  };
  const archiveFailedShards = done.flatMap((d, shard) => (d.archiveFailed ? [shard] : []));
  // the purge's rows are billed too: counted with bucket 0's metrics, one request
  const meters = done.map((d, shard) => ({ shard, d1RowsWritten: d.rowsWritten })).filter((m) => m.d1RowsWritten > 0);
  if (meters.length > 0 || archived.objects > 0 || archiveFailedShards.length > 0)
    await bucketObject(env, 0)
      .countD1RowsOf(meters, { ...archived, failures: archiveFailedShards.length })
      .catch(() => undefined);
  const purged = done.reduce((n, d) => n + d.purged, 0);
  const trimmed = done.reduce((n, d) => n + d.trimmed, 0);
  return { pulled, failedBuckets, failedShards: [...failedShards].sort((a, b) => a - b), purged, trimmed, archived, archiveFailedShards };
}

function nothingArchived(): ArchiveWrite {
  return { objects: 0, bytes: 0, executions: 0 };
}

/** A write to the archive failed: the page it held stays in D1 until a later scan writes it. */
class ArchiveFailed extends Error {}

/** A purge page's executions as the archive keeps them: one-off jobs' and occurrences (a recurring job's row is not one). */
function leavingOf(page: HistoryPage): LeavingExecution[] {
  return [
    ...page.jobs
      .filter((job) => job.cron === null)
      .map(
        (job): LeavingExecution => ({
          tenant: job.tenant,
          kind: "one-off",
          view: viewOfOneOff(job),
          jobName: job.name,
          labels: job.labels,
        }),
      ),
    ...page.occurrences.map(
      (o): LeavingExecution => ({ tenant: o.tenant, kind: "occurrence", view: viewOfOccurrence(o), jobName: o.jobName, labels: o.labels }),
    ),
  ];
}

/**
 * One shard's purge: history older than HISTORY_RETENTION_MS, page by page; then, while the shard
 * is above HISTORY_MAX_BYTES (its own size, meta.size_after), the oldest of what is left: round by
 * round half the history kept (15 days, 7.5, ...) until it is below, down to MIN_HISTORY_KEPT_MS.
 * Only finished jobs, occurrence history and idempotency keys past their window: never a live job,
 * and never a dead letter before its retention (the DLQ is what the user must act on), nor the row
 * of a dead one-off job, which its redrive needs (a listed dead letter is redrivable).
 */
async function purgeShard(
  db: Db,
  buckets: number,
  config: Config,
  now: number,
  deadlineAt: number,
  archive: R2Bucket | undefined,
): Promise<{ purged: number; trimmed: number; rowsWritten: number; archived: ArchiveWrite; archiveFailed: boolean }> {
  let purged = 0;
  let trimmed = 0;
  let rowsWritten = 0;
  const archived = nothingArchived();
  const inBudget = () => Date.now() <= deadlineAt;
  // with an archive bound, each page's executions are durable in it before they leave D1
  const toArchive = archive
    ? async (page: HistoryPage) => {
        const leaving = leavingOf(page);
        if (leaving.length === 0) return;
        const wrote = await writeArchive(archive, leaving).catch((error: unknown) => {
          throw new ArchiveFailed(`archive write failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
        });
        archived.objects += wrote.objects;
        archived.bytes += wrote.bytes;
        archived.executions += wrote.executions;
      }
    : undefined;
  /** pages of history finished more than `keptMs` ago, until caught up or out of budget; the size after */
  const purgeBefore = async (keptMs: number, trimming: boolean): Promise<number | null> => {
    for (;;) {
      const historyCutoffAt = now - keptMs;
      const idempotencyCutoffAt = now - config.IDEMPOTENCY_WINDOW_MS;
      const page: PurgedPage = toArchive
        ? await purgeArchivedHistory(db, buckets, historyCutoffAt, idempotencyCutoffAt, PURGE_PAGE, toArchive, {
            keepDeadLetters: trimming,
          })
        : await purgeHistory(db, buckets, historyCutoffAt, idempotencyCutoffAt, PURGE_PAGE, { keepDeadLetters: trimming });
      rowsWritten += page.rowsWritten;
      purged += page.deleted;
      if (trimming) trimmed += page.deleted;
      if (!page.more || !inBudget()) return page.sizeAfter;
    }
  };
  try {
    let size = await purgeBefore(config.HISTORY_RETENTION_MS, false);
    for (
      let keptMs = Math.floor(config.HISTORY_RETENTION_MS / 2);
      keptMs >= MIN_HISTORY_KEPT_MS && inBudget();
      keptMs = Math.floor(keptMs / 2)
    ) {
      if (size === null || size <= config.HISTORY_MAX_BYTES) break;
      size = await purgeBefore(keptMs, true);
    }
  } catch (error) {
    if (!(error instanceof ArchiveFailed)) throw error;
    // nothing of the page was deleted; the next scan writes it again (the same objects)
    console.error("history archive write failed: the purge waits for the next scan", error);
    return { purged, trimmed, rowsWritten, archived, archiveFailed: true };
  }
  return { purged, trimmed, rowsWritten, archived, archiveFailed: false };
}
