/**
 * The purge's mark in each shard (scheduler_meta): raised in the batch of a purge page's deletes
 * (purge.ts, purge-archived.ts), read by the API's keyed create.
 */
import { eq, sql } from "drizzle-orm";
import type { Db } from "./kit";
import { schedulerMeta } from "./schema";

/** scheduler_meta's key of the purge's mark (purgeMark), in each shard. */
const HISTORY_PURGED_BEFORE = "history_purged_before";

/**
 * The purge's mark, for a page whose cutoff is within the dedupe window (the watermark's, or a
 * HISTORY_RETENTION_MS shorter than IDEMPOTENCY_WINDOW_MS): the newest cutoff of a purge that may
 * have deleted a job whose idempotency key still replays it. A job claimed at or after the mark was
 * never purged (the purge takes only jobs last changed before its cutoff, and a job is created when
 * its key is claimed), so a keyed create that finds no job claimed after it stores the job its
 * failed insert lost, and one claimed before it never runs again (use-cases/create.ts). Written in the
 * batch of the page's deletes (a D1 batch is one transaction: d1/worker-api/d1-database, batch),
 * raised only: 1 row written when it rises, none otherwise; no statement when the cutoff is older
 * than the window (the default 30-day retention never writes it).
 */
export function purgeMark(db: Db, historyCutoffAt: number, idempotencyCutoffAt: number) {
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
