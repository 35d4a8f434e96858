/**
 * The sync pass (the scanner's pullWindow): this bucket's jobs due before now + lookahead
 * (overdue included), the changes not yet acknowledged and the redrives on their way, read from
 * every D1 shard, applied, then acknowledged in D1. Running it twice, or concurrently, applies
 * nothing twice. D1 reads and acknowledgements are here; each apply is one change of the bucket
 * (its host), so every page commits and re-arms the alarm as any RPC does.
 */
import { clearRedrives } from "../db/redrive";
import type { Shard } from "../db/shards";
import { markSynced, pendingJobs, pendingRedrives, unsyncedJobs } from "../db/sync-pass";
import type { Applied, JobDefinition, RedriveOrder, RedriveResult } from "./protocol";

const PULL_PAGE = 500;
const PULL_PAGES = 40;

/** What the pass needs of its bucket. */
export interface SyncHost {
  readonly lookaheadMs: number;
  /** applies job versions read from D1, as one change (jobs.ts applyAll, from "pull") */
  apply(bucket: number, definitions: JobDefinition[]): Promise<Applied[]>;
  /** applies redrive orders, as one change (jobs.ts redriveAll) */
  redrive(bucket: number, orders: RedriveOrder[]): Promise<RedriveResult[]>;
  /** counts D1 rows this bucket wrote on a shard (the bill) */
  countD1Rows(shard: number, rows: number): void;
}

export interface SyncResult {
  pulled: number;
  synced: number;
  redriven: number;
  failedShards: number[];
}

/** Every shard holds some of this bucket's jobs; one that fails delays only its own. */
export async function syncPass(host: SyncHost, shards: readonly Shard[], bucket: number): Promise<SyncResult> {
  const total: SyncResult = { pulled: 0, synced: 0, redriven: 0, failedShards: [] };
  for (const shard of shards) {
    try {
      const pulled = await syncShard(host, bucket, shard);
      total.pulled += pulled.pulled;
      total.synced += pulled.synced;
      total.redriven += pulled.redriven;
    } catch (error) {
      console.error(`sync pass of bucket ${bucket} on D1 shard ${shard.index} failed`, error);
      total.failedShards.push(shard.index);
    }
  }
  return total;
}

/** One shard's part of the sync pass. */
async function syncShard(
  host: SyncHost,
  bucket: number,
  { db, index }: Shard,
): Promise<{ pulled: number; synced: number; redriven: number }> {
  let pulled = 0;
  let after: { at: number; tenant: string; id: string } | null = null;
  // pages are cut by count or by bytes (db/sync-pass.ts SYNC_PAGE_BYTES): a short page is not the end, `more` says
  for (let page = 0; page < PULL_PAGES; page++) {
    const { rows, more } = await pendingJobs(db, bucket, Date.now() + host.lookaheadMs, after, PULL_PAGE);
    if (rows.length === 0) break;
    const applied = await host.apply(bucket, rows);
    pulled += applied.length;
    const last = rows[rows.length - 1]!;
    after = { at: last.nextRunAt ?? 0, tenant: last.tenant, id: last.jobId };
    if (!more) break;
  }
  // acknowledged changes leave the partial index, so each page starts from its beginning; a page
  // that acknowledged nothing (newer versions meanwhile) waits for the next pass
  let synced = 0;
  let syncRows = 0;
  for (let page = 0; page < PULL_PAGES; page++) {
    const { rows: unsynced, more } = await unsyncedJobs(db, bucket, PULL_PAGE);
    const applied = await host.apply(bucket, unsynced);
    const held = unsynced.filter((d) => applied.some((a) => a.jobId === d.jobId && a.version >= d.version));
    const written = await markSynced(
      db,
      held.map((d) => ({ tenant: d.tenant, jobId: d.jobId, version: d.version })),
    );
    synced += held.length;
    syncRows += written;
    if (!more || written === 0) break;
  }
  const orders = await pendingRedrives(db, bucket, PULL_PAGE);
  const results = await host.redrive(bucket, orders);
  const redriveRows = await clearRedrives(
    db,
    orders.filter((_o, i) => results[i]!.ok).map((o) => ({ tenant: o.tenant, executionId: o.executionId })),
  );
  host.countD1Rows(index, syncRows + redriveRows);
  return { pulled, synced, redriven: orders.length };
}
