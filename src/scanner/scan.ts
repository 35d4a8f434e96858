/**
 * The cron-trigger scan, the sync pass: every bucket pulls from D1 its jobs due before now +
 * lookahead (overdue included), the changes it has not acknowledged and the redrives on their
 * way, and re-arms its alarm; so a failed hand-off or change, a far-future job or a dropped
 * alarm heals within one scan period. Then old history leaves D1.
 */
import { configOf } from "../config";
import { bucketName } from "../core/bucketing";
import { SYSTEM_TENANT } from "../core/metrics";
import { dbOf, highestBucket, purgeHistory } from "../db/queries";

const CONCURRENT_BUCKETS = 6;
const PURGE_PAGE = 5000;
/** the purge runs page by page until caught up or this much time has passed (the next scan goes on) */
const PURGE_BUDGET_MS = 20_000;

export interface ScanReport {
  pulled: number;
  failedBuckets: number[];
  purged: number;
}

export async function scan(env: Env, now: number): Promise<ScanReport> {
  const config = configOf(env);
  const db = dbOf(env.DB);
  // every bucket that holds a job, even if BUCKETS was lowered since
  const buckets = Math.max(config.BUCKETS, (await highestBucket(db).catch(() => -1)) + 1);
  let pulled = 0;
  const failedBuckets: number[] = [];
  let next = 0;
  const worker = async () => {
    while (next < buckets) {
      const bucket = next++;
      try {
        const result = await env.BUCKET.getByName(bucketName(bucket)).pullWindow(bucket);
        pulled += result.pulled;
      } catch (error) {
        console.error(`scan of bucket ${bucket} failed`, error);
        failedBuckets.push(bucket);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(CONCURRENT_BUCKETS, buckets) }, worker));
  let purged = 0;
  let rows = 0;
  try {
    const started = Date.now();
    for (;;) {
      const page = await purgeHistory(db, buckets, now - config.HISTORY_RETENTION_MS, now - config.IDEMPOTENCY_WINDOW_MS, PURGE_PAGE);
      purged += page.deleted;
      rows += page.rowsWritten;
      if (!page.more || Date.now() - started > PURGE_BUDGET_MS) break;
    }
  } catch (error) {
    console.error("history purge failed", error);
  }
  // the purge's rows are billed too: counted with bucket 0's metrics
  if (rows > 0)
    await env.BUCKET.getByName(bucketName(0))
      .bump("d1_rows_written_total", SYSTEM_TENANT, rows)
      .catch(() => undefined);
  return { pulled, failedBuckets, purged };
}
