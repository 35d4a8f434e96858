/**
 * What a shard tells of itself (db/shards.ts, the API's metrics): its size, the oldest history it
 * holds, the highest bucket its jobs name; and shard 0's record of the most shards the deployment
 * has had, the one write here.
 */
import { eq, max, sql } from "drizzle-orm";
import type { Db } from "./kit";
import { FINISHED } from "./purge";
import { jobs, occurrences, schedulerMeta } from "./schema";

/** The database's size (meta.size_after, bytes) by a statement that reads no row; null if D1 does not say. */
export async function sizeOf(db: Db): Promise<number | null> {
  const result = (await db.run(sql`SELECT 1`)) as unknown as D1Result;
  return result.meta.size_after ?? null;
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
